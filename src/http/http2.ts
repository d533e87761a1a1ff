import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, RequestListener, ServerResponse } from 'node:http';
import {
  constants, createSecureServer, createServer as createPlainHttp2Server, Http2ServerRequest, Http2ServerResponse,
  type Http2SecureServer, type Http2Server, type Http2Session, type SecureServerOptions, type ServerHttp2Stream,
} from 'node:http2';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Http2Config } from '../config/types.js';
import type { Logger } from '../log.js';

/**
 * HTTP/2 on the TLS listener (server.tls.http2): one `http2.createSecureServer` with `allowHTTP1`, so
 * ALPN offers `h2` and `http/1.1`; an HTTP/1.1 connection (WebSockets, clients without h2) is served by
 * Node's HTTP/1.1 code exactly as on an HTTPS server, and every HTTP/2 stream arrives through the
 * compatibility API as a request/response pair that enters the same request handler, on the same
 * exchange record, as an HTTP/1.1 request. What differs is the connection:
 *  - streams of one connection run side by side (up to maxConcurrentStreams), not one at a time as the
 *    pipelining lanes run HTTP/1.1 requests; each still takes its own place in its upstream's admission
 *    (`maxConnections` + `maxQueued`), exactly as requests on separate connections do;
 *  - connection-specific headers (RFC 9113 section 8.2.2) are never written to an h2 client (see
 *    GatewayHttp2Response), and the request's `:authority` is its Host (see request-form);
 *  - a connection that floods is closed with GOAWAY (see Http2Sessions);
 *  - a drain sends every connection GOAWAY at once: the client learns which streams were taken and
 *    sends the rest elsewhere, so there is no keep-alive race to wait out.
 */

const REPLACED = Symbol('replacedHeaders');

/** Header names HTTP/2 forbids (RFC 9113 section 8.2.2); Node's HTTP/2 code throws on them. */
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** How long an HTTP/2 connection may stay silent (no frame either way) before it is closed. */
const SESSION_IDLE_MS = 60_000;
/** Node's own limits beside ours: invalid frames and refused streams tolerated per connection. */
const MAX_INVALID_FRAMES = 100;
const MAX_REJECTED_STREAMS = 100;
/** The window the per-connection budgets below are counted in. */
const BUDGET_WINDOW_MS = 10_000;
/** SETTINGS and PING frames a connection may send per window (a well-behaved client sends a handful). */
const SETTINGS_BUDGET = 50;
const PING_BUDGET = 100;
/**
 * How often every HTTP/2 connection is sent a PING: one that has not answered the previous one by the
 * next is gone (nghttp2 ended it itself, or the peer is unreachable) and is closed.
 */
const PROBE_MS = 5000;
/**
 * The header list Node takes into a stream, as a multiple of maxHeaderListBytes: what Node advertises
 * (SETTINGS_MAX_HEADER_LIST_SIZE) it also holds, once the client acknowledged it, by resetting the
 * stream itself without a word to the gateway. Above maxHeaderListBytes and up to this, a list reaches
 * the gateway, which closes the connection; larger ones are the unseen streams below.
 */
const HEADER_LIST_TAKEN = 4;
/**
 * Streams a connection may open per window that never reach the gateway: Node reset them before their
 * headers were complete (a header list over HEADER_LIST_TAKEN × maxHeaderListBytes or over Node's 128
 * fields; malformed and refused streams too, which Node counts itself as well).
 */
const UNSEEN_BUDGET = 100;
/** Floods are logged at most this often (the metric counts every one). */
const LOG_EVERY_MS = 60_000;

/** Why a connection was closed for flooding (the `reason` label of the metric). */
export type FloodReason = 'rapid_reset' | 'continuation' | 'settings_flood' | 'ping_flood' | 'invalid_frames' | 'header_list' | 'protocol_error';

/**
 * The request of an HTTP/2 stream. Its headers may be replaced (the upstream-headers step sets the
 * object the upstream gets, as on an HTTP/1.1 request); Node's own reads (method, path) stay on the
 * headers the stream arrived with.
 */
class GatewayHttp2Request extends Http2ServerRequest {
  [REPLACED]: IncomingHttpHeaders | undefined = undefined;
}
const REPLACED_DESCRIPTOR = Object.getOwnPropertyDescriptor(Http2ServerRequest.prototype, 'headers')!;
Object.defineProperty(GatewayHttp2Request.prototype, 'headers', {
  configurable: true,
  get(this: GatewayHttp2Request) {
    return this[REPLACED] ?? REPLACED_DESCRIPTOR.get!.call(this);
  },
  set(this: GatewayHttp2Request, headers: IncomingHttpHeaders) {
    this[REPLACED] = headers;
  },
});

/**
 * The response of an HTTP/2 stream: connection-specific headers are dropped wherever they are set (a
 * problem body's `Connection: close`, an upstream's `Keep-Alive`), never thrown on, and a status
 * message (HTTP/2 has none) is left out. It counts the body bytes written on its stream (`end` writes
 * through `write`), for the access line: the connection's byte count is shared by its streams.
 */
class GatewayHttp2Response extends Http2ServerResponse {
  /** Response body bytes handed to the stream (none for HEAD, none after the end). */
  bodyBytes = 0;

  override write(chunk: string | Uint8Array, callback?: (err: Error) => void): boolean;
  override write(chunk: string | Uint8Array, encoding: BufferEncoding, callback?: (err: Error) => void): boolean;
  override write(chunk: string | Uint8Array, encoding?: BufferEncoding | ((err: Error) => void), callback?: (err: Error) => void): boolean {
    if (!this.writableEnded && !this.stream.destroyed && this.req.method !== 'HEAD') {
      this.bodyBytes += typeof chunk === 'string' ? Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding : 'utf8') : chunk.byteLength;
    }
    // Node's own write takes a callback in second place as well.
    return super.write(chunk, encoding as BufferEncoding, callback);
  }

  override setHeader(name: string, value: number | string | readonly string[]): this {
    if (!CONNECTION_SPECIFIC.has(name.toLowerCase())) super.setHeader(name, value);
    return this;
  }

  override writeHead(statusCode: number, headers?: OutgoingHttpHeaders): this;
  override writeHead(statusCode: number, statusMessage: string, headers?: OutgoingHttpHeaders): this;
  override writeHead(statusCode: number, message?: string | OutgoingHttpHeaders, headers?: OutgoingHttpHeaders): this {
    const given = typeof message === 'object' ? message : headers;
    if (given === undefined) return super.writeHead(statusCode);
    // Copied only when there is something to leave out (an HTTP/2 upstream's headers never have any).
    let kept: OutgoingHttpHeaders | undefined;
    for (const name in given) {
      if (!CONNECTION_SPECIFIC.has(name.toLowerCase())) continue;
      kept = {};
      for (const n in given) if (!CONNECTION_SPECIFIC.has(n.toLowerCase())) kept[n] = given[n];
      break;
    }
    return super.writeHead(statusCode, kept ?? given);
  }
}
// As on an HTTP/1.1 response: `destroyed` says the stream is gone (ended, reset or cut), and
// `writableFinished` that the whole answer went out. Node's own says whether the stream's writable side
// is finished, and a stream reset before its answer ended is (Node ends it on the reset): a client that
// left would look answered.
Object.defineProperty(GatewayHttp2Response.prototype, 'destroyed', {
  configurable: true,
  get(this: GatewayHttp2Response) {
    return this.stream.destroyed;
  },
});
Object.defineProperty(GatewayHttp2Response.prototype, 'writableFinished', {
  configurable: true,
  get(this: GatewayHttp2Response) {
    return this.stream.writableFinished && !this.stream.aborted;
  },
});

/** The body bytes an HTTP/2 stream's response has written so far; undefined for an HTTP/1 response. */
export function streamBodyBytes(res: object): number | undefined {
  return res instanceof GatewayHttp2Response ? res.bodyBytes : undefined;
}

/** What an HTTP/2 server needs beyond the TLS options. */
export interface Http2ListenerOptions {
  limits: Http2Config;
  /** Told of every connection closed for flooding (the metric). */
  onFlood: (reason: FloodReason) => void;
  log: Logger;
}

/**
 * The TLS listener with HTTP/2: Node's HTTP/2 server with HTTP/1.1 allowed, its HTTP/1.1 side set as
 * an https.Server would be (keep-alive timeout; headers and request timeouts are the caller's, set on
 * the server). Add the request listener with `entry` (after this: the flood checks see a stream first).
 */
export function createHttp2Listener(tlsOptions: SecureServerOptions, options: Http2ListenerOptions): { server: Http2SecureServer; sessions: Http2Sessions } {
  const server = createSecureServer({
    ...tlsOptions,
    allowHTTP1: true,
    ...http2ServerOptions(options.limits),
  });
  // What http.Server has and Node's HTTP/2 server does not set for its HTTP/1.1 connections.
  (server as unknown as { keepAliveTimeout: number }).keepAliveTimeout = 5000;
  const sessions = new Http2Sessions(server, options);
  return { server, sessions };
}

/** What both HTTP/2 listeners (TLS and h2c) take: the settings they announce, the frame limits, the gateway's request and response classes. */
function http2ServerOptions(limits: Http2ListenerOptions['limits']) {
  return {
    settings: {
      maxConcurrentStreams: limits.maxConcurrentStreams,
      maxHeaderListSize: HEADER_LIST_TAKEN * limits.maxHeaderListBytes,
      enablePush: false,
    },
    maxSessionInvalidFrames: MAX_INVALID_FRAMES,
    maxSessionRejectedStreams: MAX_REJECTED_STREAMS,
    Http2ServerRequest: GatewayHttp2Request as typeof Http2ServerRequest,
    Http2ServerResponse: GatewayHttp2Response as unknown as typeof Http2ServerResponse,
  };
}

/** What every HTTP/2 connection starts with (RFC 9113 section 3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

/**
 * HTTP/2 with prior knowledge on the plain listener (server.h2c): an HTTP/2 server without TLS, with
 * the TLS listener's settings and flood checks, that takes the connections of `server` (the plain
 * HTTP/1.1 one) whose first bytes are the HTTP/2 preface; every other connection goes to `server` as
 * before. A connection that sends nothing within `firstBytesMs` is closed (the HTTP/1.1 server's
 * headers timeout starts only once it has it). Add the request listener with `entry`.
 */
export function createH2cListener(server: Server, options: Http2ListenerOptions & { firstBytesMs: number }): { h2c: Http2Server; sessions: Http2Sessions } {
  const h2c = createPlainHttp2Server(http2ServerOptions(options.limits));
  const sessions = new Http2Sessions(h2c, options);
  // Node's HTTP/1.1 connection handling, called for the connections that are not HTTP/2.
  const http1 = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    let first: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), options.firstBytesMs);
    const hand = (http2: boolean) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      socket.unshift(first);
      if (http2) h2c.emit('connection', socket);
      else for (const listener of http1) listener.call(server, socket);
      process.nextTick(() => socket.resume());
    };
    const onData = (chunk: Buffer) => {
      first = first.length === 0 ? chunk : Buffer.concat([first, chunk]);
      const n = Math.min(first.length, PREFACE.length);
      const http2 = first.subarray(0, n).equals(PREFACE.subarray(0, n));
      // The preface may come in pieces: wait for all of it (anything else is told apart at its first byte).
      if (http2 && first.length < PREFACE.length) return;
      hand(http2);
    };
    const onClose = () => clearTimeout(timer);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.on('error', () => socket.destroy());
  });
  return { h2c, sessions };
}

/**
 * The request listener of the HTTP/2 listener: an HTTP/2 stream goes straight to `serve` (its
 * connection's streams run side by side, bounded by maxConcurrentStreams), unless the client reset it
 * already; an HTTP/1.1 request goes to `http1` (the pipelining lanes).
 */
export function entry(serve: RequestListener, http1: RequestListener): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.httpVersionMajor !== 2) return http1(req, res);
    const stream = (req as unknown as Http2ServerRequest).stream;
    if (stream.destroyed) return;
    // A body without Content-Length (HTTP/2 frames it in DATA frames) is a chunked one toward the
    // HTTP/1.1 upstream, and the gateway's framing checks see it as a body.
    if (!stream.endAfterHeaders && req.headers['content-length'] === undefined) req.headers['transfer-encoding'] = 'chunked';
    serve(req, res);
  };
}

interface Budget {
  count: number;
  since: number;
}

/** Per connection: what it spent of its budgets in the current window. */
interface SessionState {
  resets: Budget;
  /** Streams the client opened that Node reset before the gateway saw them (see UNSEEN_BUDGET). */
  unseen: Budget;
  /** The id up to which every stream reached the gateway or was counted unseen. */
  seen: number;
  settings: Budget;
  pings: Budget;
  flooded: boolean;
  /** A PING of the liveness probe is unanswered. */
  probing: boolean;
}

/**
 * The HTTP/2 connections of the listener: counted against the flood budgets, told to go away on a
 * drain, and cut when the drain's grace is over (HTTP/1.1 connections on the same listener too).
 *
 * What closes a connection with GOAWAY (ENHANCE_YOUR_CALM unless Node's own check caught it first):
 *  - rapid_reset: more streams reset by the client before their answer began (RST_STREAM with any code,
 *    NO_ERROR too) in a window than twice maxConcurrentStreams (at least 100): HEADERS + RST_STREAM loops
 *    never reach the concurrency limit, yet each stream costs a request;
 *  - settings_flood / ping_flood: more SETTINGS or PING frames in a window than SETTINGS_BUDGET / PING_BUDGET
 *    (a client that reads the acknowledgements is never stopped by nghttp2's own outbound-queue limit);
 *  - header_list: a request whose header list is larger than maxHeaderListBytes; or more than UNSEEN_BUDGET
 *    streams in a window that Node reset before the gateway saw them (a list larger than what Node takes,
 *    HEADER_LIST_TAKEN × maxHeaderListBytes: Node resets such a stream with ENHANCE_YOUR_CALM and says
 *    nothing). Those are found by their ids: a client opens streams in increasing order, so the ids
 *    below one that arrives (or below the last nghttp2 took, at each liveness probe) that never arrived
 *    were reset before the gateway saw them;
 *  - continuation / invalid_frames: a header block that never ends (nghttp2 stops it after a few
 *    CONTINUATION frames) and frames that break the protocol or that Node counts as invalid
 *    (maxSessionInvalidFrames, maxSessionRejectedStreams): Node ends the connection, it is counted here.
 * A connection nghttp2 ended without telling (its GOAWAY sent, the socket no longer read) is closed by
 * the idle timeout.
 */
export class Http2Sessions {
  private readonly sessions = new Map<Http2Session, SessionState>();
  private readonly sockets = new Set<TLSSocket>();
  private closing = false;
  private lastLog = 0;
  private unlogged = 0;
  private readonly resetBudget: number;

  constructor(server: Http2SecureServer | Http2Server, private readonly options: Http2ListenerOptions) {
    this.resetBudget = Math.max(100, 2 * options.limits.maxConcurrentStreams);
    server.on('secureConnection', (socket: TLSSocket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    server.on('session', (session: Http2Session) => this.open(session));
    server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, rawHeaders?: string[]) => this.onStream(stream, headers, rawHeaders));
    // Errors of a session are handled on the session (see open); Node also reports them here.
    server.on('sessionError', () => {});
  }

  /** Open HTTP/2 connections. */
  get size(): number {
    return this.sessions.size;
  }

  /**
   * A drain: every HTTP/2 connection gets GOAWAY now (its streams in progress finish, then it closes),
   * and so does every one that completes its handshake from now on.
   */
  goAwayAll(): void {
    this.closing = true;
    for (const session of this.sessions.keys()) session.close();
  }

  /** The drain's grace is over: every connection of the listener is cut, HTTP/1.1 ones too. */
  destroyAll(): void {
    for (const session of this.sessions.keys()) session.destroy();
    for (const socket of this.sockets) socket.destroy();
  }

  private open(session: Http2Session): void {
    const now = Date.now();
    const state: SessionState = { resets: { count: 0, since: now }, unseen: { count: 0, since: now }, seen: -1, settings: { count: 0, since: now }, pings: { count: 0, since: now }, flooded: false, probing: false };
    this.sessions.set(session, state);
    session.once('close', () => {
      this.sessions.delete(session);
      if (this.sessions.size === 0) this.stopProbing();
    });
    session.on('error', (err: NodeJS.ErrnoException) => {
      const reason = errorReason(err);
      if (reason) this.flooded(session, state, reason, false);
    });
    session.on('remoteSettings', () => {
      if (spend(state.settings, SETTINGS_BUDGET)) this.flooded(session, state, 'settings_flood');
    });
    session.on('ping', () => {
      if (spend(state.pings, PING_BUDGET)) this.flooded(session, state, 'ping_flood');
    });
    // Node ends a session that stays silent this long (no 'timeout' listener on the server).
    session.setTimeout(SESSION_IDLE_MS);
    if (this.closing) session.close();
    this.probe ??= setInterval(() => this.probeAll(), PROBE_MS).unref();
  }

  private probe: NodeJS.Timeout | undefined;

  private stopProbing(): void {
    clearInterval(this.probe);
    this.probe = undefined;
  }

  /**
   * nghttp2 ends some connections without telling Node's JavaScript side (a header block continued past
   * its limits, streams reset faster than its own rate limit, a protocol error it answers with GOAWAY
   * itself): it sends GOAWAY and stops reading, and the socket stays open. A connection that has not
   * answered the last PING by now is such a one (or unreachable): it is closed and counted. Each probe
   * also counts the streams Node reset unseen since the last stream that arrived (see UNSEEN_BUDGET): a
   * connection that opens nothing else is caught here.
   */
  private probeAll(): void {
    for (const [session, state] of this.sessions) {
      if (session.destroyed || state.flooded) continue;
      // The last stream nghttp2 took may still be arriving (its header block not ended): only those below it.
      if (this.unseenBelow(state, (session.state.lastProcStreamID ?? 0) - 2)) {
        this.flooded(session, state, 'header_list');
        continue;
      }
      if (state.probing) {
        this.flooded(session, state, 'protocol_error');
        continue;
      }
      state.probing = true;
      try {
        session.ping((err) => {
          if (!err) state.probing = false;
        });
      } catch {
        // Closing already, or too many PINGs outstanding: the next round decides.
      }
    }
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, rawHeaders: string[] | undefined): void {
    const session = stream.session;
    const state = session ? this.sessions.get(session) : undefined;
    const id = stream.id;
    if (!session || !state || id === undefined) return;
    if (this.unseenBelow(state, id - 2)) {
      this.flooded(session, state, 'header_list');
      return;
    }
    state.seen = Math.max(state.seen, id);
    if (headerListBytes(headers, rawHeaders) > this.options.limits.maxHeaderListBytes) {
      this.flooded(session, state, 'header_list');
      return;
    }
    // Closed before its answer began: reset by the client (RST_STREAM with any code, NO_ERROR included:
    // RFC 9113 lets a client send it), or (rarely) cut by the gateway. A stream answered and ended has
    // sent its headers, whatever its code.
    stream.once('close', () => {
      if (!stream.headersSent && spend(state.resets, this.resetBudget)) this.flooded(session, state, 'rapid_reset');
    });
  }

  /**
   * Counts the client's stream ids after the last one seen, up to `id`, as unseen (they never reached the
   * gateway); true when that exceeds the budget.
   */
  private unseenBelow(state: SessionState, id: number): boolean {
    if (id <= state.seen) return false;
    const unseen = (id - state.seen) / 2;
    state.seen = id;
    return spend(state.unseen, UNSEEN_BUDGET, unseen);
  }

  /** Counts and (at most once a minute) logs a flood; `close`: close the connection with GOAWAY (Node has not already). */
  private flooded(session: Http2Session, state: SessionState, reason: FloodReason, close = true): void {
    if (state.flooded) return;
    state.flooded = true;
    const peer = session.socket?.remoteAddress;
    if (close && !session.destroyed) session.destroy(new Error(`http2 flood: ${reason}`), constants.NGHTTP2_ENHANCE_YOUR_CALM);
    this.options.onFlood(reason);
    const now = Date.now();
    if (now - this.lastLog < LOG_EVERY_MS) {
      this.unlogged++;
      return;
    }
    this.options.log.warn('http2 connection closed: flood', { reason, peer, notLoggedSincePrevious: this.unlogged });
    this.lastLog = now;
    this.unlogged = 0;
  }
}

/** Counts `count` events (one unless told) in the budget's window; true when the budget is exceeded. */
function spend(budget: Budget, limit: number, count = 1): boolean {
  const now = Date.now();
  if (now - budget.since >= BUDGET_WINDOW_MS) {
    budget.since = now;
    budget.count = 0;
  }
  budget.count += count;
  return budget.count > limit;
}

/** A session error that means the peer broke the protocol (not a connection reset, not our own GOAWAY). */
function errorReason(err: NodeJS.ErrnoException): FloodReason | undefined {
  if (/CONTINUATION/i.test(err.message)) return 'continuation';
  if (err.code === 'ERR_HTTP2_ERROR' || err.code === 'ERR_HTTP2_TOO_MANY_INVALID_FRAMES') return 'invalid_frames';
  return undefined;
}

/** The header list's size as RFC 9113 section 6.5.2 counts it: name + value + 32 per field. */
function headerListBytes(headers: IncomingHttpHeaders, raw: string[] | undefined): number {
  let total = 0;
  if (raw) {
    for (let i = 0; i < raw.length; i += 2) total += raw[i]!.length + (raw[i + 1]?.length ?? 0) + 32;
    return total;
  }
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    for (const v of Array.isArray(value) ? value : [value ?? '']) total += name.length + String(v).length + 32;
  }
  return total;
}
