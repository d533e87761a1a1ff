import { STATUS_CODES, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { grpcAnswerHeaders, grpcContentType, recordGrpcStatus } from '../core/grpc.js';
import { destroySoon, headerBlock } from '../core/raw-head.js';

/** Every code the gateway can answer with; the `code` member of a problem body. */
export type ProblemCode =
  | 'invalid_request'
  | 'request_timeout'
  | 'expectation_failed'
  | 'malformed_json'
  | 'unsupported_media_type'
  | 'payload_too_large'
  | 'method_not_allowed'
  | 'not_found'
  | 'invalid_path'
  | 'uri_too_long'
  | 'headers_too_large'
  | 'missing_credentials'
  | 'invalid_credentials'
  | 'invalid_token'
  | 'token_expired'
  | 'invalid_refresh_token'
  | 'forbidden'
  | 'too_many_attempts'
  | 'rate_limited'
  | 'websocket_not_allowed'
  | 'cors_not_allowed'
  | 'invalid_page_size'
  | 'invalid_page'
  | 'invalid_sort'
  | 'store_unavailable'
  | 'identity_provider_unavailable'
  | 'directory_unavailable'
  | 'bad_gateway'
  | 'gateway_timeout'
  | 'service_unavailable'
  | 'internal_error';

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  [extension: string]: unknown;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * The error class of the HTTP edge: a status, a problem code, headers and body members, built by the
 * HTTP features, the pipeline, the forwarders and the composition root. Code below that edge (the
 * stores, tokens, credentials, identity sources and policies, core) refuses with a DomainError
 * (src/core/domain-error.ts) instead, which DOMAIN_ANSWERS (src/http/errors.ts) turns into one of
 * these; `npm run lint` keeps this module out of those parts. Koa's own `onerror` reads `status`,
 * `expose` and `headers`, so a stray HttpProblem that escapes our handler is still answered with the
 * right status.
 */
export class HttpProblem extends Error {
  readonly status: number;
  readonly code: ProblemCode;
  readonly expose: boolean;
  readonly headers: Record<string, string | string[]>;
  readonly extensions: Record<string, unknown>;

  constructor(
    status: number,
    code: ProblemCode,
    detail: string,
    options: { headers?: Record<string, string | string[]>; extensions?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HttpProblem';
    this.status = status;
    this.code = code;
    this.expose = status < 500;
    this.headers = options.headers ?? {};
    this.extensions = options.extensions ?? {};
  }

  toBody(): ProblemBody {
    return problemBody(this.status, this.code, this.message, this.extensions);
  }
}

export function problemBody(
  status: number,
  code: ProblemCode,
  detail: string,
  extensions: Record<string, unknown> = {},
): ProblemBody {
  return {
    ...extensions,
    type: `urn:auth-gateway:problem:${code}`,
    title: STATUS_CODES[status] ?? 'Error',
    status,
    detail,
    code,
  };
}

/** A fresh 503 for what arrives while the gateway stops (readiness, new handshakes). */
export function shuttingDown(): HttpProblem {
  return new HttpProblem(503, 'service_unavailable', 'the gateway is shutting down', { headers: { 'Retry-After': '1' } });
}

/** A fresh 500 that says nothing internal. */
export function internalError(): HttpProblem {
  return new HttpProblem(500, 'internal_error', 'internal error');
}

/**
 * The one writer of problem bodies: on a ServerResponse (every request, WebSocket handshakes included)
 * or, where Node hands over a bare socket (a request its parser refused, CONNECT), on the socket as raw
 * HTTP/1.1. Either way: `application/problem+json`, the problem's headers, and `Connection: close` when
 * the request's body was not read (it would be taken for the next request). A gRPC or gRPC-Web request
 * (`content-type: application/grpc…`) gets the same refusal in its own form instead (see writeGrpcProblem).
 */
export function writeProblem(res: ServerResponse, problem: HttpProblem, extra: OutgoingHttpHeaders = {}): void {
  const grpcType = grpcContentType(res.req);
  if (grpcType !== undefined) return writeGrpcProblem(res, problem, extra, grpcType);
  const body = JSON.stringify(problem.toBody());
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) res.setHeader(name, value);
  for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  if (!res.req.complete) res.setHeader('Connection', 'close');
  res.statusCode = problem.status;
  res.end(body);
}

/**
 * A refusal to a gRPC client: a problem body would only read as UNKNOWN to it. HTTP 200, the gRPC
 * status of the problem's HTTP status (see GRPC_STATUS_OF_HTTP) and its detail as `grpc-message`, as a
 * trailers-only answer; the problem's own headers (WWW-Authenticate, Retry-After) go along.
 */
function writeGrpcProblem(res: ServerResponse, problem: HttpProblem, extra: OutgoingHttpHeaders, contentType: string): void {
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) res.setHeader(name, value);
  for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
  const grpc = grpcAnswerHeaders(problem, contentType);
  for (const [name, value] of Object.entries(grpc)) res.setHeader(name, value);
  if (!res.req.complete) res.setHeader('Connection', 'close');
  res.statusCode = 200;
  recordGrpcStatus(res, grpc['grpc-status']!);
  // No body and no head written yet: to an HTTP/2 client, one HEADERS frame with END_STREAM.
  res.end();
}

/** The same answer on a bare socket, which is then closed (shortly destroyed, see destroySoon). */
export function writeRawProblem(socket: Duplex, problem: HttpProblem, extra: OutgoingHttpHeaders = {}): void {
  if (!socket.writable || socket.destroyed) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(problem.toBody());
  socket.end(headerBlock(problem.status, {
    ...extra,
    ...problem.headers,
    'Content-Type': PROBLEM_CONTENT_TYPE,
    'Content-Length': Buffer.byteLength(body),
    Connection: 'close',
  }) + body);
  destroySoon(socket);
}
