import type { ClientRequest, IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { parse as legacyParse } from 'node:url';
import type { Principal } from './principal.js';
import { newRequestId } from './request-id.js';

/**
 * How a request that went through the pipeline is finished: forwarded to the upstream, (a WebSocket
 * handshake) tunnelled to it, or (a forward-auth call) answered with who it is. The request form picks it;
 * a path the own-endpoint lookup knows may pick another. Adding one: a name here and a function in
 * src/pipeline/hand-offs.ts (docs/pipeline-extension.md).
 */
export type HandOffName = 'forward' | 'tunnel' | 'answer';

/** Why a forwarded response was cut after it began (it was logged as started, never as complete). */
export type Cut = 'client_closed' | 'upstream_closed' | 'response_idle';

/** What the exchange needs of a route: the route table's own type is a layer above. */
export interface RouteRef {
  readonly path: string;
  readonly upstream: string | undefined;
}

/**
 * The exchange's trace (src/tracing), when tracing is on: its SERVER span, started when the request
 * arrives and ended with the exchange. Off, an exchange has none (no span object, no context).
 */
export interface ExchangeTrace {
  /** The trace and span ids as hex (the log lines carry them). */
  readonly traceId: string;
  readonly spanId: string;
  /** Runs `fn` in the span's context: spans of inner work started within it are children of the span. */
  within<T>(fn: () => T): T;
  /**
   * Starts the CLIENT span of one attempt at an upstream (`origin`: `scheme://host:port`) and writes its
   * `traceparent` (and the other propagators' headers) into `headers`, the object the request is sent with.
   */
  upstreamCall(headers: IncomingHttpHeaders, method: string, origin: string, path: string): UpstreamCall;
  /** Ends the SERVER span with what the exchange ended as (status, route, principal, problem code). */
  end(ex: Exchange): void;
}

/**
 * The CLIENT span of one upstream attempt: it follows an HTTP/1.1 request to its answer or failure, then
 * ends (follow); an HTTP/2 attempt (the h2 engine) says what happened itself: its answer's status, why it
 * failed, and when it is over (its stream closed, or no stream was ever opened).
 */
export interface UpstreamCall {
  follow(request: ClientRequest): void;
  /** The upstream answered with this status. */
  answered(status: number): void;
  /** The attempt failed: `type` is the span's error.type (an error code, `timeout`, …). */
  failed(type: string, message?: string): void;
  /** The attempt is over: the span ends (once). */
  end(): void;
}

/** Starts an exchange's trace (a request's `traceparent` continued, else a new trace). */
export interface ExchangeTracer {
  start(ex: Exchange): ExchangeTrace;
}

const WELL_FORMED_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * One request's record, from its arrival to its access line: the request and response, the target as
 * the gateway reads it, and what each step decided. Every request the gateway handles gets one, made by
 * `newExchange` (one class, every field set in the constructor: one shape for the engine). The pipeline's
 * steps read and write it; the gateway's own endpoints (Koa) see it as `ctx.state`.
 */
/** What a forward-auth call is about (see Exchange.forwardAuth). */
export interface ForwardAuthState {
  /** The forward-auth path the call was sent to. */
  path: string;
  host: string | undefined;
  proto: 'http' | 'https' | undefined;
  /** The described path as written (the access line shows it). */
  described: string | undefined;
  /**
   * The proxy asks for refusals it can relay (`X-Gateway-Relay: refusals`, nginx's recipe): any refusal is
   * answered 403 with the sealed answer in `X-Gateway-Refusal` (see src/pipeline/refusal-relay.ts).
   */
  relay: boolean;
  /** The status of the refusal that was relayed sealed (the access line and the answers metric name it). */
  relayed: number | undefined;
}

export class Exchange<R extends RouteRef = RouteRef> {
  /** performance.now() when the request arrived. */
  readonly started: number;
  /** socket.bytesWritten when the request arrived, with the access log on (its byte count starts there); else -1. */
  bytesBefore = -1;
  /**
   * The request's id: a well-formed X-Request-Id it carried, else a new one; echoed on the response. Each
   * writer of an answer puts it there: `stampId` before a head of the gateway's own (problem bodies, own
   * endpoints, forward-auth answers, handshakes), the Forwarder in the header object it writes the
   * upstream's head with (one writeHead with an object and no header set before it: Node takes that
   * object as it is, instead of a setHeader per header).
   */
  readonly requestId: string;
  /** The method the pipeline judges: the request's own, or the one a forward-auth call describes. */
  method: string;
  /** The path the pipeline judges (normalized by the request form; a forward-auth call's described one). */
  path: string;
  /** The query string without `?` ('' when there is none). */
  query: string;
  /** How the pipeline ends for this request. */
  handOff: HandOffName = 'forward';
  /** The request carries more than one Authorization header (authentication refuses it). */
  repeatedAuthorization = false;
  /** The user name a request tried (Basic, token create) before it was verified: for the access line. */
  triedUser: string | undefined = undefined;
  principal: Principal | undefined = undefined;
  /**
   * The x5t#S256 thumbprint of the verified client certificate of the request's connection (recorded
   * whichever credential decided: the access line, the identity assertion); undefined: none.
   */
  certificate: string | undefined = undefined;
  /** The route the path matched (set after authentication). */
  route: R | undefined = undefined;
  /**
   * A forward-auth call: the path it was sent to, the host and scheme it describes, and the described
   * path as written (set once method and URI are well-formed; the access line shows it).
   */
  forwardAuth: ForwardAuthState | undefined = undefined;
  /** The parsed JSON body of a /v1/tokens request. */
  body: Record<string, unknown> | undefined = undefined;
  /** `100 Continue` was sent. */
  continued = false;
  /** The problem code, when the gateway answered with a problem body itself (also in the upstream's place). */
  problem: string | undefined = undefined;
  /** Why a forwarded response was cut after it began. */
  cut: Cut | undefined = undefined;
  /**
   * The header object the upstream gets (the upstream headers step builds it; the Forwarder sends it):
   * the request's own headers stay as Node parsed them.
   */
  upstreamHeaders: IncomingHttpHeaders | undefined = undefined;
  /** Answered by one of the gateway's own endpoints (Koa), which may still be writing when its handler returns. */
  own = false;
  /** Its trace, when tracing is on (see ExchangeTrace); undefined: off. */
  trace: ExchangeTrace | undefined = undefined;
  private ip: string | undefined = undefined;
  /**
   * The socket's peer, read when the request arrives: an HTTP/2 request's socket is a view of its
   * stream's connection, and once the stream is closed (its answer out: when the access line is written)
   * it has no address any more.
   */
  private readonly peer: string;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    /** server.trustProxy: how many X-Forwarded-For entries from the right a trusted proxy wrote. */
    private readonly trustProxy: number,
  ) {
    this.started = performance.now();
    this.peer = req.socket.remoteAddress ?? '';
    const offered = offeredId(req.rawHeaders);
    this.requestId = offered !== undefined && WELL_FORMED_ID.test(offered) ? offered : newRequestId();
    this.method = req.method ?? 'GET';
    const target = splitTarget(req.url ?? '');
    this.path = target.path;
    this.query = target.query;
  }

  /**
   * The client's address: the socket's peer, or behind `trustProxy` proxies the leftmost of the last
   * `trustProxy` X-Forwarded-For entries (what those proxies wrote; anything left of them the client may
   * have invented). The same all along the exchange, after its answer too.
   */
  get address(): string {
    if (this.ip === undefined) {
      const forwarded = this.trustProxy > 0 ? this.req.headers['x-forwarded-for'] : undefined;
      let ip: string | undefined;
      if (typeof forwarded === 'string' && forwarded !== '') {
        const entries = forwarded.split(',');
        ip = entries[Math.max(0, entries.length - this.trustProxy)]!.trim();
      }
      this.ip = ip || this.peer;
    }
    return this.ip;
  }

  /** Puts X-Request-Id on the response the gateway is about to write itself (see requestId). */
  stampId(): void {
    if (!this.res.headersSent) this.res.setHeader('X-Request-Id', this.requestId);
  }

  /** The path and query the pipeline judges, as one request target. */
  get target(): string {
    return this.query ? `${this.path}?${this.query}` : this.path;
  }
}

/**
 * The path and query of a request target, split exactly as Koa (parseurl) splits them: at the first `?`,
 * with the legacy URL parser for targets holding whitespace or `#` (which it reads as a fragment).
 * A target that is not origin-form has no path (the request form refuses it).
 */
function splitTarget(url: string): { path: string; query: string } {
  if (url.charCodeAt(0) !== 0x2f) return { path: '', query: '' };
  let q = -1;
  for (let i = 1; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 0x3f) {
      if (q < 0) q = i;
    } else if (c === 0x23 || c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d || c === 0xa0 || c === 0xfeff) {
      const parsed = legacyParse(url);
      return { path: parsed.pathname ?? '', query: parsed.query as string | null ?? '' };
    }
  }
  return q < 0 ? { path: url, query: '' } : { path: url.slice(0, q), query: url.slice(q + 1) };
}

/**
 * The X-Request-Id a request carries, read from its raw header lines: the headers object Node builds has
 * a shape of its own for every set and order of header names, so reading a name it usually lacks from it
 * is a generic lookup on every request. Two of them are as bad as one malformed (Node would join them
 * with a comma): undefined, and the request gets a new id.
 */
function offeredId(raw: string[]): string | undefined {
  let id: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== 12 || name.toLowerCase() !== 'x-request-id') continue;
    if (id !== undefined) return undefined;
    id = raw[i + 1];
  }
  return id;
}

/**
 * The one factory of exchanges. Nothing is added to the request itself: a property of our own on Node's
 * IncomingMessage would give it a shape of its own, and Node's reads of it would slow down.
 */
export function newExchange<R extends RouteRef>(req: IncomingMessage, res: ServerResponse, trustProxy: number): Exchange<R> {
  return new Exchange<R>(req, res, trustProxy);
}
