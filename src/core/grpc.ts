import type { IncomingMessage, ServerResponse } from 'node:http';

/** gRPC status codes the gateway answers with itself (grpc/doc/statuscodes.md). */
const GrpcStatus = {
  OK: 0, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14, UNAUTHENTICATED: 16,
} as const;

/**
 * The one table from a refusal's HTTP status to the gRPC status a gRPC (or gRPC-Web) client is given
 * instead of a problem body. A status not listed is UNKNOWN (4xx) or INTERNAL (5xx).
 */
const GRPC_STATUS_OF_HTTP: Readonly<Record<number, number>> = {
  400: GrpcStatus.INVALID_ARGUMENT,
  401: GrpcStatus.UNAUTHENTICATED,
  403: GrpcStatus.PERMISSION_DENIED,
  // No route for the path: the method does not exist as far as the client can tell.
  404: GrpcStatus.UNIMPLEMENTED,
  405: GrpcStatus.UNIMPLEMENTED,
  408: GrpcStatus.DEADLINE_EXCEEDED,
  413: GrpcStatus.RESOURCE_EXHAUSTED,
  414: GrpcStatus.INVALID_ARGUMENT,
  415: GrpcStatus.INVALID_ARGUMENT,
  429: GrpcStatus.RESOURCE_EXHAUSTED,
  431: GrpcStatus.RESOURCE_EXHAUSTED,
  500: GrpcStatus.INTERNAL,
  502: GrpcStatus.UNAVAILABLE,
  503: GrpcStatus.UNAVAILABLE,
  504: GrpcStatus.DEADLINE_EXCEEDED,
};

/** The gRPC status a refusal with this HTTP status is given. */
function grpcStatusOf(status: number): number {
  return GRPC_STATUS_OF_HTTP[status] ?? (status >= 500 ? GrpcStatus.INTERNAL : GrpcStatus.UNKNOWN);
}

/**
 * Requests whose answer is read by a proxy, not by the gRPC client whose headers they carry: a forward-auth
 * question (the proxy passes the client's `content-type` on to it). Its refusals must keep their HTTP status:
 * a gRPC answer is an HTTP 200, which a proxy takes for "let it through".
 */
const ANSWERED_TO_A_PROXY = new WeakSet<IncomingMessage>();

/** Marks a request whose refusals are never written in the gRPC form (see ANSWERED_TO_A_PROXY). */
export function answeredToAProxy(req: IncomingMessage): void {
  ANSWERED_TO_A_PROXY.add(req);
}

/** `application/grpc…` (gRPC, gRPC-Web and gRPC-Web-text alike): the request's content type, else undefined. */
export function grpcContentType(req: IncomingMessage): string | undefined {
  if (ANSWERED_TO_A_PROXY.has(req)) return undefined;
  const type = req.headers['content-type'];
  return typeof type === 'string' && /^application\/grpc(?:[+;-]|$)/i.test(type) ? type : undefined;
}

/**
 * `grpc-message` as gRPC over HTTP/2 spells it: UTF-8, with every byte outside printable ASCII, and
 * `%` itself, percent-encoded.
 */
export function encodeGrpcMessage(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * The gRPC status each answer carried (the access line and the metrics read it), where the gateway saw
 * one: a property of the response itself, not a WeakMap entry (one per call is work for every
 * garbage collection while the response lives).
 */
const GRPC_STATUS = Symbol('grpcStatus');
type WithGrpcStatus = ServerResponse & { [GRPC_STATUS]?: string };

export function recordGrpcStatus(res: ServerResponse, status: string | number): void {
  (res as WithGrpcStatus)[GRPC_STATUS] = String(status);
}

export function recordedGrpcStatus(res: ServerResponse): string | undefined {
  return (res as WithGrpcStatus)[GRPC_STATUS];
}

/**
 * A refusal (its HTTP status and detail) as a gRPC answer: HTTP 200 with the request's gRPC content
 * type, and `grpc-status` and `grpc-message` (the detail) in the headers, with no body: a trailers-only
 * response (one HEADERS frame with END_STREAM on HTTP/2; gRPC-Web clients read the same headers over
 * HTTP/1.1).
 */
export function grpcAnswerHeaders(problem: { readonly status: number; readonly message: string }, contentType: string): Record<string, string> {
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return {
    'content-type': type.startsWith('application/grpc-web') ? type : 'application/grpc',
    'grpc-status': String(grpcStatusOf(problem.status)),
    'grpc-message': encodeGrpcMessage(problem.message),
  };
}
