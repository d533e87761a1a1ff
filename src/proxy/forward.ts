import type { ClientRequest, IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Stream } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import httpProxy from 'http-proxy';
import { systemClock, type Clock } from '../clock.js';
import type { Timeouts, UpstreamConfig } from '../config/types.js';
import { HttpProblem, type ProblemCode, writeProblem } from '../http/problem.js';
import type { Cut, ExchangeTrace } from '../core/exchange.js';
import type { Logger } from '../log.js';
import { endToEndHeaders } from '../core/headers.js';
import { recordGrpcStatus } from '../core/grpc.js';
import { rewriteLocation, type LocationMap } from './location.js';
import { UpstreamPool, type Target } from './pool.js';
import { announcedTrailers, asksForTrailers, passedTrailers } from './trailers.js';

/** Methods a request may be sent again for, once it may have reached an upstream (RFC 9110 section 9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** Whether a request carries a body (its framing as Node parsed it). */
function hasBody(req: IncomingMessage): boolean {
  const h = req.headers;
  return h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0');
}
/** Errors that mean the target did not take the connection. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

/** http-proxy's server of one target; every request it is handed is a ProxiedRequest. */
type TargetProxy = httpProxy;

/** The Forwarding a request http-proxy reports on belongs to (it is handed ProxiedRequests only). */
function forwardingOf(req: IncomingMessage): Forwarding {
  return (req as unknown as ProxiedRequest).forwarding;
}

interface Upstream {
  name: string;
  pool: UpstreamPool;
  preserveHost: boolean;
}

/** How a forwarded exchange ended, for the access log and metrics (the request's exchange). */
export interface ForwardOutcome {
  /** The request's X-Request-Id, put on the response (the upstream's own does not replace it). */
  readonly requestId: string;
  /**
   * The header object the upstream gets, built by the upstream headers step (the request's own headers
   * are left as Node parsed them). Absent (a Forwarder used without the pipeline): a copy of the request's.
   */
  readonly upstreamHeaders?: IncomingHttpHeaders | undefined;
  /** The problem code when the gateway answered in the upstream's place. */
  problem: string | undefined;
  /** Why the response was cut after it began (it was logged as started, never as complete). */
  cut: Cut | undefined;
  /** The exchange's trace when tracing is on: each attempt gets a CLIENT span and its traceparent. */
  readonly trace?: ExchangeTrace;
}

/**
 * Takes an upstream's `101 Switching Protocols` over: returns why it is refused (the gateway then
 * answers 502 and closes), or undefined once it owns both sockets (the exchange is over for the
 * Forwarder). Only a request forwarded with one may be switched; any other 101 is a 502.
 */
type SwitchHandler = (proxyRes: IncomingMessage, upstream: Socket, upstreamHead: Buffer) => string | undefined;

/** What one forwarded request needs beyond the request itself (all from its route). */
export interface ForwardOptions {
  upstream: string;
  timeouts: Timeouts;
  /** The route prefix removed from the path (stripPrefix), mapped back in redirects. */
  strippedPrefix: string | undefined;
  /** A WebSocket handshake: what to do with the upstream's 101. */
  onSwitch?: SwitchHandler;
}

/**
 * Where the exchange is: the one socket timeout on the upstream connection means something else in each
 * phase, so a slow upload, a slow backend and a quiet stream are each judged by their own limit.
 */
const enum Phase { Sending, Waiting, Streaming }

/** Why the gateway gave up on an upstream, answered in its place. */
interface Failure {
  status: 408 | 502 | 504;
  code: ProblemCode;
  detail: string;
}

/**
 * The Forwarder's own record of one forwarded request, from forward() to its settling, across a retry:
 * one class, every field set in the constructor (one shape for the engine).
 */
class Forwarding {
  phase = Phase.Sending;
  /** The upstream socket was connected (bytes may have reached the target). */
  connected = false;
  retried = false;
  /** The request carries a body, read before http-proxy sees it (see ProxiedRequest). */
  readonly withBody: boolean;
  /** The current attempt's upstream request, from the moment http-proxy makes it (see Forwarder.takeOver). */
  proxyReq: ClientRequest | undefined = undefined;
  /** The attempt's CLIENT span, when tracing is on. */
  call: ReturnType<ExchangeTrace['upstreamCall']> | undefined = undefined;
  proxyRes: IncomingMessage | undefined = undefined;
  /** Set when the gateway gave up on the upstream, before it destroys the request. */
  failure: Failure | undefined = undefined;
  /** The last error handled (http-proxy reports a client's request error once per attempt made). */
  lastError: Error | undefined = undefined;
  /** The request as http-proxy sees it. */
  readonly view: ProxiedRequest;
  private over = false;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly upstream: Upstream,
    public target: Target,
    readonly options: ForwardOptions,
    readonly outcome: ForwardOutcome,
    /** The header object the upstream gets (see outgoingHeaders). */
    readonly headers: IncomingHttpHeaders,
    private readonly onDone: (f: Forwarding) => void,
  ) {
    this.withBody = hasBody(req);
    this.view = new ProxiedRequest(this);
  }

  /** Ends the exchange's bookkeeping and settles forward()'s promise (once). */
  done(): void {
    if (this.over) return;
    this.over = true;
    this.onDone(this);
  }

  get isOver(): boolean {
    return this.over;
  }
}

/**
 * The request as http-proxy is handed it: the client's method, the header object the gateway built for
 * the upstream (never the client's own, which http-proxy would copy as they are: an HTTP/2 client's
 * pseudo-headers, its Authorization), the client's socket and its events. http-proxy reads nothing else
 * of a request with the options the Forwarder gives it (no xfwd, no timeout, a body `buffer`).
 */
class ProxiedRequest {
  readonly method: string;
  /** Unread (toProxy, ignorePath): the request target is set exactly by takeOver. */
  readonly url = '';
  headers: IncomingHttpHeaders;

  constructor(readonly forwarding: Forwarding) {
    this.method = forwarding.req.method!;
    this.headers = forwarding.headers;
  }

  get socket(): Socket {
    return this.forwarding.req.socket;
  }

  get connection(): Socket {
    return this.forwarding.req.socket;
  }

  /** http-proxy listens for the client's request 'aborted' and 'error' here. */
  on(event: 'aborted' | 'error', listener: (err?: Error) => void): this {
    this.forwarding.req.on(event, listener);
    return this;
  }
}

/**
 * What http-proxy pipes into the upstream request it has just made (its `buffer` option): the
 * Forwarder's hand-over point, called synchronously inside web() before a byte is written.
 */
class HandOver extends Stream {
  constructor(private readonly take: (proxyReq: ClientRequest) => void) {
    super();
  }

  override pipe<T extends NodeJS.WritableStream>(destination: T): T {
    this.take(destination as unknown as ClientRequest);
    return destination;
  }
}

/**
 * Adds the trailers that pass (see trailers.ts) to an outgoing message. Node validates them again: a
 * field it will not write (a character its own parser let through) is not sent, and neither are those
 * after it; it must not throw out of an 'end' listener (the body itself is complete without them).
 */
function addTrailers(out: { addTrailers(headers: OutgoingHttpHeaders): void }, trailers: IncomingHttpHeaders): void {
  const passed = passedTrailers(trailers);
  if (!passed) return;
  try {
    out.addTrailers(passed);
  } catch {
    // See above: the message ends without them.
  }
}

/** Why an exchange with an upstream failed, for the metrics: every failed attempt, retried ones included. */
export type UpstreamErrorKind = 'refused' | 'reset' | 'timeout';
export type UpstreamErrorListener = (upstream: string, kind: UpstreamErrorKind) => void;

/** Methods http-proxy's deleteLength pass gives `content-length: 0` when they carry none (see send). */
const DELETE_LENGTH = new Set(['DELETE', 'OPTIONS']);

/**
 * Streams requests to upstreams through http-proxy (one proxy server per target, its options fixed, over
 * the target's keep-alive agent: its admission limit), and writes the responses itself
 * (selfHandleResponse). Refused/reset before a response → 502, timed out → 504 (problem bodies, timed by
 * the Forwarder's own phase timers, never http-proxy's proxyTimeout); a failure after the response began
 * cuts the stream; a client that leaves tears the upstream request down.
 */
export class Forwarder {
  private readonly upstreams = new Map<string, Upstream>();
  /** http-proxy's server of each target, made once: no option is copied or URL parsed per request. */
  private readonly proxies = new Map<Target, TargetProxy>();
  /** The request web() is handing over now: it makes its upstream request synchronously (see HandOver). */
  private handing: Forwarding | undefined = undefined;
  /** Exchanges not finished yet, so a retired Forwarder knows when its connections may go. */
  private inFlight = 0;
  private retired = false;
  private closed = false;

  constructor(
    upstreams: Record<string, UpstreamConfig>,
    private readonly log: Logger,
    private readonly onUpstreamError: UpstreamErrorListener = () => {},
    private readonly clock: Clock = systemClock,
  ) {
    for (const [name, u] of Object.entries(upstreams)) {
      const pool = new UpstreamPool(name, u, log);
      this.upstreams.set(name, { name, pool, preserveHost: u.preserveHost });
      for (const target of pool.targets) this.proxies.set(target, this.proxyOf(target));
    }
  }

  /**
   * http-proxy for one target, through its public options and events only. Its traps, each answered:
   * the target is given parsed (a string is url.parse'd on every request); the request target never goes
   * through url.parse or its path joining (ignorePath; takeOver sets it as the pipeline left it); no
   * xfwd (it appends to a client's X-Forwarded-For; the header policy builds its own); the target's
   * agent (without one every request opens a connection); no proxyTimeout (it aborts as a reset, a 502:
 * the phase timers answer 504); selfHandleResponse (the Forwarder shapes the
   * answer); an 'error' listener (without one an error throws out of the process) and an 'econnreset' one.
   */
  private proxyOf(target: Target): TargetProxy {
    const to = target.request;
    const proxy = httpProxy.createProxyServer({
      target: { protocol: to.protocol, hostname: to.hostname, host: to.hostname, port: String(to.port) },
      agent: target.agent,
      // Neither url.parse (toProxy) nor the path joining (ignorePath, prependPath) sees the request target.
      toProxy: true,
      ignorePath: true,
      prependPath: false,
      xfwd: false,
      changeOrigin: false,
      selfHandleResponse: true,
      buffer: new HandOver((proxyReq) => this.takeOver(proxyReq)),
    });
    proxy.on('error', (err, req) => this.onAttemptError(err, forwardingOf(req)));
    // The client's connection reset: http-proxy aborts the upstream request of the attempt that heard it;
    // the current attempt's goes too (a retry's).
    proxy.on('econnreset', (_err, req) => forwardingOf(req).proxyReq?.destroy());
    proxy.on('proxyRes', (proxyRes, req) => this.onResponse(proxyRes, forwardingOf(req)));
    return proxy;
  }

  /**
   * Forwards req (url rewritten, the upstream's headers on the outcome); settles when the response is
   * done or the client left, with how it ended written to `outcome`.
   */
  forward(req: IncomingMessage, res: ServerResponse, options: ForwardOptions, outcome: ForwardOutcome): Promise<void> {
    const upstream = this.upstreams.get(options.upstream)!;
    const target = upstream.pool.pick(this.clock.now());
    if (!target) throw upstream.pool.busy();
    return new Promise((resolve) => {
      const f = new Forwarding(req, res, upstream, target, options, outcome, outcome.upstreamHeaders ?? { ...req.headers }, (done) => {
        done.target.inFlight--;
        if (--this.inFlight === 0 && this.retired) this.close();
        resolve();
      });
      target.inFlight++;
      this.inFlight++;
      // A response has its connection whenever it is handled (RequestLanes runs one request at a time
      // per connection, and none parsed behind an answer that ended it): its 'close' always comes.
      res.on('close', () => this.onClientGone(f));
      this.send(f);
    });
  }

  /** Requests waiting for a connection, per upstream (the upstream_queued gauge). */
  queued(): Array<[string, number]> {
    return [...this.upstreams.values()].map((u) => [u.name, u.pool.queued()]);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const u of this.upstreams.values()) u.pool.close();
  }

  /** A reload replaced this Forwarder: it closes its pools once the exchanges it still carries are done. */
  retire(): void {
    this.retired = true;
    if (this.inFlight === 0) this.close();
  }

  /** The response closed: if it is not over, the client left (or was cut) and the upstream's work is for nobody. */
  private onClientGone(f: Forwarding): void {
    if (f.isOver) return;
    if (!f.res.writableFinished) {
      f.outcome.cut ??= 'client_closed';
      f.proxyReq?.destroy();
      f.proxyRes?.destroy();
    } else if (f.proxyReq && !f.proxyReq.writableFinished) {
      // The upstream answered before the body was all sent: the rest is for nobody (neither Node nor
      // http-proxy passes a client's abort on to the upstream request, so this is the only place it ends).
      f.proxyReq.destroy();
    }
    f.done();
  }

  /**
   * The header object the upstream gets, finished: the one the upstream headers step built, with the
   * target's Host unless the upstream preserves the client's. The one place where a header is added to
   * every upstream request before http-proxy copies the object (web()).
   */
  private outgoingHeaders(f: Forwarding): IncomingHttpHeaders {
    const headers = f.headers;
    if (!f.upstream.preserveHost) headers.host = f.target.request.host;
    // The client asked for trailers: the upstream may send them (the header policy removed TE, hop-by-hop).
    const te = f.req.headers.te;
    if (te !== undefined && asksForTrailers(te)) headers.te = 'trailers';
    return headers;
  }

  /**
   * One attempt on f.target, handed to the target's http-proxy. What the pipeline left goes out as it
   * is: the method, req.url (after the target's base path) and the header object (outgoingHeaders).
   * The body is streamed as Node's parser framed it: chunked stays chunked (its trailers after it), a
   * length stays that length, none means no body (takeOver). Nothing else rewrites the request.
   */
  private send(f: Forwarding): void {
    const view = f.view;
    const headers = this.outgoingHeaders(f);
    // Tracing (src/tracing): a CLIENT span per attempt, whose traceparent the upstream receives.
    f.call = f.outcome.trace?.upstreamCall(headers, view.method, f.target.origin, f.target.basePath + f.req.url);
    // http-proxy's deleteLength pass writes `content-length: 0` into a DELETE or OPTIONS without a length
    // and drops its transfer-encoding (a chunked body would then reach the upstream as a second request):
    // it gets a copy to write on, and takeOver puts the request's own framing back.
    view.headers = DELETE_LENGTH.has(view.method) && !headers['content-length'] ? { ...headers } : headers;
    this.handing = f;
    try {
      this.proxies.get(f.target)!.web(view as unknown as IncomingMessage, f.res);
    } catch (err) {
      // Node refused to make the request (a header it will not send): nothing went out.
      f.proxyReq?.destroy();
      this.log.warn('upstream request not made', { upstream: f.upstream.name, error: (err as Error).message });
      this.answer(f, { status: 502, code: 'bad_gateway', detail: `the ${f.upstream.name} service could not be sent the request` });
    } finally {
      this.handing = undefined;
    }
  }

  /**
   * http-proxy made the attempt's upstream request (inside web(), nothing written yet): the request
   * target is set exactly as the pipeline left it (url.parse would have made a backslash a slash, its
   * path joining collapsed `//`), the framing put back where deleteLength took it, and the body sent.
   * Known at once, not only once it has a connection: a client that leaves while it waits for one
   * (every connection of the target in use) withdraws it.
   */
  private takeOver(proxyReq: ClientRequest): void {
    const f = this.handing!;
    this.handing = undefined;
    f.proxyReq = proxyReq;
    f.call?.follow(proxyReq);
    proxyReq.path = f.target.basePath + f.req.url;
    if (f.view.headers !== f.headers) {
      proxyReq.removeHeader('content-length');
      const length = f.headers['content-length'];
      const te = f.headers['transfer-encoding'];
      if (length !== undefined) proxyReq.setHeader('content-length', length);
      if (te !== undefined) proxyReq.setHeader('transfer-encoding', te);
    }
    proxyReq.once('socket', () => this.onRequest(proxyReq, f));
    // An HTTP/1 request without a body has nothing to stream: its head goes out as soon as the request
    // has its socket, without a pipe's listeners on both streams (Node's server drains the request
    // itself once the response is done). A body of a length is piped; a chunked body, or an HTTP/2
    // stream, is piped and followed by its trailers (sendBody).
    if (f.req.httpVersionMajor === 1 && !f.withBody) proxyReq.end();
    else if (f.req.httpVersionMajor === 1 && f.req.headers['transfer-encoding'] === undefined) f.req.pipe(proxyReq);
    else this.sendBody(f.req, proxyReq);
  }

  /**
   * A body that may end in trailers (a chunked HTTP/1.1 body, any HTTP/2 stream): streamed, then its
   * trailers (those that pass, see trailers.ts) added before the upstream request ends. Node sends them
   * only on a chunked upstream request (an HTTP/2 body of a known length goes without them).
   */
  private sendBody(req: IncomingMessage, proxyReq: ClientRequest): void {
    const end = () => {
      if (proxyReq.destroyed) return;
      addTrailers(proxyReq, req.trailers);
      proxyReq.end();
    };
    // A request sent again (a retry: never one with a body) was read to its end by the first attempt.
    if (req.readableEnded) return end();
    req.pipe(proxyReq, { end: false });
    req.once('end', end);
  }

  /** An attempt failed (http-proxy's 'error': the upstream request's, or the client request's, once). */
  private onAttemptError(err: Error, f: Forwarding): void {
    if (err === f.lastError) return;
    f.lastError = err;
    this.onError(err, f);
  }

  /**
   * Once, on another target when there is one: a request that could not connect (the target refused it,
   * or did not accept it within connectMs), or an idempotent one that got no response. Never a request
   * with a body: it was streamed into the failed attempt and is gone (buffering every upload to replay
   * it would cost what streaming saves). Never after a response began, never after a response timeout.
   */
  private retry(err: NodeJS.ErrnoException, f: Forwarding): boolean {
    const now = this.clock.now();
    const refused = !f.connected && (NOT_CONNECTED.has(err.code ?? '') || f.failure?.code === 'gateway_timeout');
    if (refused) f.upstream.pool.markDown(f.target, now);
    const timedOut = f.failure !== undefined && f.connected;
    if (f.retried || f.proxyRes || f.withBody || timedOut || f.outcome.cut) return false;
    if (!refused && !IDEMPOTENT.has(f.req.method!)) return false;
    const next = f.upstream.pool.pick(now, f.target);
    // A target that refused will refuse again at once; a reset (a pooled socket the target had just
    // closed) is worth another try on the same one.
    if (!next || (refused && next === f.target)) return false;
    f.retried = true;
    f.target.inFlight--;
    f.target = next;
    f.target.inFlight++;
    f.phase = Phase.Sending;
    f.connected = false;
    f.failure = undefined;
    f.proxyReq = undefined;
    this.send(f);
    return true;
  }

  /** The upstream request has its socket: from now on the socket's inactivity timer is the only timer. */
  private onRequest(proxyReq: ClientRequest, f: Forwarding): void {
    const socket = proxyReq.socket as Socket;
    const { timeouts } = f.options;
    // A request without a body is sent as soon as it has its socket: the upstream's time to answer runs
    // from now on (no 'finish' to wait for).
    const bodiless = !f.withBody;
    if (bodiless) f.phase = Phase.Waiting;
    if (socket.connecting) {
      socket.setTimeout(timeouts.connectMs);
      // To an https target the connection is ready once the TLS handshake is done, not at TCP connect:
      // a target that accepts TCP and never answers the handshake is one that cannot be reached.
      socket.once((socket as TLSSocket).encrypted ? 'secureConnect' : 'connect', () => {
        f.connected = true;
        socket.setTimeout(f.phase === Phase.Waiting ? timeouts.responseMs : timeouts.idleMs);
      });
    } else {
      f.connected = true;
      socket.setTimeout(bodiless ? timeouts.responseMs : timeouts.idleMs);
    }
    proxyReq.on('timeout', () => this.onTimeout(f));
    // With a listener Node hands a 101 over instead of dropping the connection without a word.
    proxyReq.on('upgrade', (proxyRes: IncomingMessage, upstream: Socket, head: Buffer) => this.onSwitch(f, proxyRes, upstream, head));
    proxyReq.on('information', (info: { statusCode: number; headers: IncomingHttpHeaders }) => this.onInformation(f, info.statusCode, info.headers));
    if (bodiless) return;
    proxyReq.once('finish', () => {
      // The whole request body is sent: now the upstream's own time to answer runs.
      if (f.phase !== Phase.Sending) return;
      f.phase = Phase.Waiting;
      if (!socket.connecting) socket.setTimeout(timeouts.responseMs);
    });
  }

  private onTimeout(f: Forwarding): void {
    if (f.res.writableFinished || f.res.destroyed) {
      // The answer is out. A request body still coming (the upstream answered early) that stalls is
      // ended on both sides; otherwise the exchange is over and the socket may be pooled: nothing to do.
      const proxyReq = f.proxyReq;
      if (proxyReq && !proxyReq.writableFinished) {
        proxyReq.destroy();
        f.req.socket.destroy();
      }
      return;
    }
    const { timeouts } = f.options;
    const name = f.upstream.name;
    if (f.phase === Phase.Streaming) {
      // A response body that stalls (no bytes for idleMs) is cut, so a stuck upstream cannot hold the client forever.
      f.outcome.cut = 'response_idle';
      this.onUpstreamError(name, 'timeout');
      f.proxyRes?.destroy();
      f.res.destroy();
      return;
    }
    if (!f.connected) {
      f.failure = { status: 504, code: 'gateway_timeout', detail: `the ${name} service could not be reached within ${timeouts.connectMs} ms` };
    } else if (f.phase === Phase.Waiting || !f.withBody) {
      f.failure = { status: 504, code: 'gateway_timeout', detail: `the ${name} service did not answer within ${timeouts.responseMs} ms` };
    } else if (f.proxyReq?.writableNeedDrain) {
      // Sending, and the upstream stopped reading the body.
      f.failure = { status: 504, code: 'gateway_timeout', detail: `the ${name} service stopped reading the request body for ${timeouts.idleMs} ms` };
    } else {
      // Sending, and the client stopped sending its body.
      f.failure = { status: 408, code: 'request_timeout', detail: `no bytes of the request body arrived for ${timeouts.idleMs} ms` };
    }
    f.proxyReq?.destroy();
  }

  /**
   * Writes the upstream's response (http-proxy's 'proxyRes', with selfHandleResponse): its end-to-end
   * headers in one writeHead (Node frames the client's response by the client's protocol: chunked, a
   * length, or for HTTP/1.0 the connection's end), the request id, and Location headers that point at
   * the upstream made to point at the gateway; a chunked body's trailers after it (sendChunked).
   */
  private onResponse(proxyRes: IncomingMessage, f: Forwarding): void {
    const res = f.res;
    if (res.headersSent || res.destroyed) {
      proxyRes.destroy();
      return;
    }
    const status = proxyRes.statusCode ?? 0;
    if (status < 100 || status > 999) {
      // Node's client parses any three digits; writeHead would throw on them, outside any handler.
      proxyRes.destroy();
      this.answer(f, { status: 502, code: 'bad_gateway', detail: `the ${f.upstream.name} service answered with an invalid status` });
      this.onUpstreamError(f.upstream.name, 'reset');
      return;
    }
    f.phase = Phase.Streaming;
    f.proxyRes = proxyRes;
    f.proxyReq?.socket?.setTimeout(f.options.timeouts.idleMs);
    const headers = endToEndHeaders(proxyRes.headers);
    if (headers.location !== undefined || headers['content-location'] !== undefined) this.rewriteLocations(headers, f);
    headers['x-request-id'] = f.outcome.requestId;
    // A chunked body may end in trailers (a content length cannot): only such a response pays for them.
    const chunked = proxyRes.headers['transfer-encoding'] !== undefined;
    if (chunked) this.announceTrailers(headers, proxyRes, f, status);
    try {
      res.writeHead(status, proxyRes.statusMessage, headers);
    } catch {
      // Whatever else the client parser accepts and writeHead refuses: the upstream's fault, a 502.
      proxyRes.destroy();
      for (const name of res.getHeaderNames()) if (name !== 'x-request-id') res.removeHeader(name);
      this.answer(f, { status: 502, code: 'bad_gateway', detail: `the ${f.upstream.name} service answered with an invalid response head` });
      this.onUpstreamError(f.upstream.name, 'reset');
      return;
    }
    if (chunked) this.sendChunked(proxyRes, res);
    else proxyRes.pipe(res);
    // The upstream answered before the body was all sent (a 413, an early 200): the rest of the body may
    // still come, but Node stops timing the upstream request once its response ends. From the end of the
    // answer the client's socket carries the idle limit (after Node's own finish handler, which sets the
    // keep-alive timeout; the shorter of the two stays): Node ends a socket that stays silent that long,
    // and the upstream request goes with it.
    const proxyReq = f.proxyReq;
    if (proxyReq && !proxyReq.writableFinished) {
      res.once('finish', () => {
        const socket = res.req.socket;
        const idleMs = f.options.timeouts.idleMs;
        if (!res.req.complete && (!socket.timeout || idleMs < socket.timeout)) socket.setTimeout(idleMs);
      });
    }
    // An upstream that dies (or is cut) mid-body must not leave the client waiting for the rest.
    proxyRes.on('close', () => {
      if (proxyRes.complete) return;
      if (f.outcome.cut === undefined) this.onUpstreamError(f.upstream.name, 'reset');
      f.outcome.cut ??= 'upstream_closed';
      res.destroy();
    });
  }

  /**
   * The upstream's `Trailer` announcement (hop-by-hop, so endToEndHeaders dropped it), without the names
   * that will not pass, on a response that will be chunked: Node refuses the header on any other (an
   * HTTP/1.0 client's, a HEAD's, a 204's or 304's), and there no trailer can go anyway.
   */
  private announceTrailers(headers: IncomingHttpHeaders, proxyRes: IncomingMessage, f: Forwarding, status: number): void {
    const announced = proxyRes.headers.trailer;
    if (announced === undefined) return;
    const req = f.req;
    if (req.method === 'HEAD' || status === 204 || status === 304 || (req.httpVersionMajor === 1 && req.httpVersionMinor === 0)) return;
    const names = announcedTrailers(announced);
    if (names !== undefined) headers.trailer = names;
  }

  /**
   * The response body, then its trailers (those that pass, see trailers.ts): an HTTP/1.1 client gets them
   * on its chunked body, an HTTP/2 client as the stream's trailers. A gRPC status among them is noted for
   * the access line.
   */
  private sendChunked(proxyRes: IncomingMessage, res: ServerResponse): void {
    proxyRes.pipe(res, { end: false });
    proxyRes.once('end', () => {
      if (res.destroyed) return;
      const grpcStatus = proxyRes.trailers['grpc-status'];
      if (grpcStatus !== undefined) recordGrpcStatus(res, grpcStatus);
      addTrailers(res, proxyRes.trailers);
      res.end();
    });
  }

  /**
   * An informational response of the upstream: `103 Early Hints` (with a Link) passes on to an HTTP/1.1
   * or HTTP/2 client before the answer; any other 1xx is the hop's own (a 100 above all: the gateway
   * answered the client's Expect itself, after authentication).
   */
  private onInformation(f: Forwarding, status: number, fields: IncomingHttpHeaders): void {
    const res = f.res;
    if (status !== 103 || res.headersSent || res.destroyed) return;
    if (f.req.httpVersionMajor === 1 && f.req.httpVersionMinor === 0) return;
    const hints = passedTrailers(fields);
    if (hints?.link === undefined) return;
    try {
      res.writeEarlyHints(hints as Record<string, string | string[]>);
    } catch {
      // A Link Node will not write: the hints are only hints.
    }
  }

  /**
   * The upstream answered `101 Switching Protocols`. Tunnelled only for a handshake whose hand-off
   * accepts this 101 (see SwitchHandler); a 101 to a plain request, or a 101 the handshake refuses, is
   * the upstream's fault: 502 at once, its connection closed.
   */
  private onSwitch(f: Forwarding, proxyRes: IncomingMessage, upstream: Socket, upstreamHead: Buffer): void {
    upstream.on('error', () => upstream.destroy());
    upstream.setTimeout(0);
    const res = f.res;
    if (res.headersSent || res.destroyed) {
      upstream.destroy();
      return;
    }
    const name = f.upstream.name;
    const onSwitch = f.options.onSwitch;
    const refused = onSwitch
      ? onSwitch(proxyRes, upstream, upstreamHead)
      : `the ${name} service answered a request that asked for no upgrade with 101 Switching Protocols`;
    if (refused === undefined) {
      f.done();
      return;
    }
    upstream.destroy();
    this.log.warn('upstream switched protocols wrongly', { upstream: name, target: f.target.origin, status: 502, reason: refused });
    this.onUpstreamError(name, 'reset');
    res.shouldKeepAlive = false;
    this.answer(f, { status: 502, code: 'bad_gateway', detail: refused });
  }

  private rewriteLocations(headers: IncomingMessage['headers'], f: Forwarding): void {
    const map: LocationMap = {
      upstreamOrigins: f.upstream.pool.origins,
      upstreamBasePath: f.target.basePath,
      routePrefix: f.options.strippedPrefix,
    };
    for (const name of ['location', 'content-location'] as const) {
      const value = headers[name];
      if (typeof value === 'string') headers[name] = rewriteLocation(value, map);
    }
  }

  private onError(err: Error, f: Forwarding): void {
    if (f.outcome.cut) return;
    const code = (err as NodeJS.ErrnoException).code ?? '';
    // The client's own failures (its body stalled: 408) are not the upstream's.
    if (f.failure?.status !== 408) {
      this.onUpstreamError(f.upstream.name, f.failure ? 'timeout' : NOT_CONNECTED.has(code) ? 'refused' : 'reset');
    }
    if (this.retry(err as NodeJS.ErrnoException, f)) return;
    const failure = f.failure ?? { status: 502, code: 'bad_gateway' as const, detail: `the ${f.upstream.name} service is unavailable` };
    this.log.warn('upstream failed', { upstream: f.upstream.name, target: f.target.origin, status: failure.status, error: code || err.message });
    this.answer(f, failure);
  }

  /** The gateway's own answer in the upstream's place: a problem body, or a cut once a response began. */
  private answer(f: Forwarding, failure: Failure): void {
    const res = f.res;
    if (res.headersSent || res.destroyed) {
      f.outcome.cut ??= 'upstream_closed';
      res.destroy();
      return;
    }
    f.outcome.problem = failure.code;
    res.setHeader('X-Request-Id', f.outcome.requestId);
    writeProblem(res, new HttpProblem(failure.status, failure.code, failure.detail));
  }
}
