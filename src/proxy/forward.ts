import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Timeouts, UpstreamConfig } from '../config/types.js';
import { HttpProblem, type ProblemCode } from '../core/problem.js';
import { writeProblem } from '../core/problem-writer.js';
import type { Cut, ExchangeTrace } from '../core/exchange.js';
import type { Logger } from '../log.js';
import { endToEndHeaders } from '../core/headers.js';
import { rewriteLocation, type LocationMap } from './location.js';
import { UpstreamPool, type Target } from './pool.js';

/** Methods a request may be sent again for, once it may have reached an upstream (RFC 9110 section 9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** Whether a request carries a body (its framing as Node parsed it). */
function hasBody(req: IncomingMessage): boolean {
  const h = req.headers;
  return h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0');
}
/** Errors that mean the target did not take the connection. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

interface Upstream {
  name: string;
  pool: UpstreamPool;
  preserveHost: boolean;
}

/** How a forwarded exchange ended, for the access log and metrics (the request's exchange). */
export interface ForwardOutcome {
  /** The request's X-Request-Id, put on the response (the upstream's own does not replace it). */
  readonly requestId: string;
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
export type SwitchHandler = (proxyRes: IncomingMessage, upstream: Socket, upstreamHead: Buffer) => string | undefined;

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

interface Exchange {
  upstream: Upstream;
  target: Target;
  options: ForwardOptions;
  res: ServerResponse;
  phase: Phase;
  /** The upstream socket was connected (bytes may have reached the target). */
  connected: boolean;
  retried: boolean;
  /** The current attempt's upstream request, from the moment it is made (send). */
  proxyReq?: ClientRequest;
  proxyRes?: IncomingMessage;
  /** Set when the gateway gave up on the upstream, before it destroys the request. */
  failure?: { status: 408 | 504; code: ProblemCode; detail: string };
  outcome: ForwardOutcome;
  /** Ends the exchange's bookkeeping and settles forward()'s promise (once). */
  done: () => void;
}

/** Why an exchange with an upstream failed, for the metrics: every failed attempt, retried ones included. */
export type UpstreamErrorKind = 'refused' | 'reset' | 'timeout';
export type UpstreamErrorListener = (upstream: string, kind: UpstreamErrorKind) => void;

/**
 * Streams requests to upstreams with node:http over one keep-alive agent per target, and writes the
 * responses itself. Refused/reset before a response → 502, timed out → 504 (problem bodies); a failure
 * after the response began cuts the stream; a client that leaves tears the upstream request down.
 */
export class Forwarder {
  private readonly upstreams = new Map<string, Upstream>();
  /** Exchanges not finished yet, so a retired Forwarder knows when its connections may go. */
  private inFlight = 0;
  private retired = false;
  private closed = false;

  constructor(upstreams: Record<string, UpstreamConfig>, private readonly log: Logger, private readonly onUpstreamError: UpstreamErrorListener = () => {}) {
    for (const [name, u] of Object.entries(upstreams)) {
      this.upstreams.set(name, { name, pool: new UpstreamPool(name, u, log), preserveHost: u.preserveHost });
    }
  }

  /**
   * Forwards req (url and headers already rewritten); settles when the response is done or the client
   * left, with how it ended written to `outcome`.
   */
  forward(req: IncomingMessage, res: ServerResponse, options: ForwardOptions, outcome: ForwardOutcome): Promise<void> {
    const upstream = this.upstreams.get(options.upstream)!;
    const target = upstream.pool.pick(Date.now());
    if (!target) throw upstream.pool.busy();
    return new Promise((resolve) => {
      let over = false;
      const gone = () => {
        if (over) return;
        // The client left (or was cut) before the response finished: stop the upstream working for nobody.
        if (!res.writableFinished) {
          exchange.outcome.cut ??= 'client_closed';
          exchange.proxyReq?.destroy();
          exchange.proxyRes?.destroy();
        } else if (exchange.proxyReq && !exchange.proxyReq.writableFinished) {
          // The upstream answered before the body was all sent: the rest is for nobody (Node does not pass
          // a client's abort on to the upstream request, so this is the only place it ends).
          exchange.proxyReq.destroy();
        }
        exchange.done();
      };
      const exchange: Exchange = {
        upstream, target, options, res, phase: Phase.Sending, connected: false, retried: false, outcome,
        done: () => {
          if (over) return;
          over = true;
          exchange.target.inFlight--;
          if (--this.inFlight === 0 && this.retired) this.close();
          resolve();
        },
      };
      target.inFlight++;
      this.inFlight++;
      // A response has its connection whenever it is handled (RequestLanes runs one request at a time
      // per connection, and none parsed behind an answer that ended it): its 'close' always comes.
      res.on('close', gone);
      this.send(req, exchange);
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

  /**
   * One attempt on exchange.target: what the pipeline left on req goes out as it is, the method, req.url
   * (after the target's base path) and the header object the header policy built, with the target's Host
   * unless the upstream preserves the client's. The body is streamed as Node's parser framed it: chunked
   * stays chunked, a length stays that length, none means no body. Nothing else rewrites the request.
   */
  private send(req: IncomingMessage, exchange: Exchange): void {
    const target = exchange.target;
    const to = target.request;
    const headers = req.headers;
    if (!exchange.upstream.preserveHost) headers.host = to.host;
    // Tracing (src/tracing): a CLIENT span per attempt, whose traceparent the upstream receives.
    const call = exchange.outcome.trace?.upstreamCall(headers, req.method!, target.origin, target.basePath + req.url);
    const proxyReq = to.send({ hostname: to.hostname, port: to.port, agent: target.agent, method: req.method, path: target.basePath + req.url, headers });
    call?.follow(proxyReq);
    // Known at once, not only once it has a connection: a client that leaves while it waits for one
    // (every connection of the target in use) withdraws it.
    exchange.proxyReq = proxyReq;
    proxyReq.once('socket', () => this.onRequest(proxyReq, req, exchange));
    proxyReq.on('response', (proxyRes: IncomingMessage) => this.onResponse(proxyRes, exchange));
    // Without an 'error' listener a failed request would take the process down.
    proxyReq.on('error', (err) => this.onAttemptError(err, req, exchange, proxyReq));
    // The client's request failing (its connection reset mid-body) ends the attempt the same way; once.
    if (!exchange.retried) req.on('error', (err) => this.onAttemptError(err, req, exchange, exchange.proxyReq));
    // An HTTP/1 request without a body has nothing to stream: its head goes out as soon as the request
    // has its socket, without a pipe's listeners on both streams (Node's server drains the request
    // itself once the response is done). A body, or an HTTP/2 stream, is piped.
    if (req.httpVersionMajor === 1 && !hasBody(req)) proxyReq.end();
    else req.pipe(proxyReq);
  }

  /** An attempt failed: the client is gone (nothing to answer), or it is the upstream's failure (onError). */
  private onAttemptError(err: Error, req: IncomingMessage, exchange: Exchange, proxyReq: ClientRequest | undefined): void {
    if (req.socket.destroyed && (err as NodeJS.ErrnoException).code === 'ECONNRESET') {
      proxyReq?.destroy();
      return;
    }
    this.onError(err, req, exchange);
  }

  /**
   * Once, on another target when there is one: a request that could not connect (the target refused it,
   * or did not accept it within connectMs), or an idempotent one that got no response. Never a request
   * with a body: it was streamed into the failed attempt and is gone (buffering every upload to replay
   * it would cost what streaming saves). Never after a response began, never after a response timeout.
   */
  private retry(err: NodeJS.ErrnoException, req: IncomingMessage, exchange: Exchange): boolean {
    const refused = !exchange.connected && (NOT_CONNECTED.has(err.code ?? '') || exchange.failure?.code === 'gateway_timeout');
    if (refused) exchange.upstream.pool.markDown(exchange.target, Date.now());
    const timedOut = exchange.failure !== undefined && exchange.connected;
    if (exchange.retried || exchange.proxyRes || hasBody(req) || timedOut || exchange.outcome.cut) return false;
    if (!refused && !IDEMPOTENT.has(req.method!)) return false;
    const next = exchange.upstream.pool.pick(Date.now(), exchange.target);
    // A target that refused will refuse again at once; a reset (a pooled socket the target had just
    // closed) is worth another try on the same one.
    if (!next || (refused && next === exchange.target)) return false;
    exchange.retried = true;
    exchange.target.inFlight--;
    exchange.target = next;
    exchange.target.inFlight++;
    exchange.phase = Phase.Sending;
    exchange.connected = false;
    exchange.failure = undefined;
    exchange.proxyReq = undefined;
    this.send(req, exchange);
    return true;
  }

  /** The upstream request has its socket: from now on the socket's inactivity timer is the only timer. */
  private onRequest(proxyReq: ClientRequest, req: IncomingMessage, exchange: Exchange): void {
    const socket = proxyReq.socket as Socket;
    const { timeouts } = exchange.options;
    // A request without a body is sent as soon as it has its socket: the upstream's time to answer runs
    // from now on (no 'finish' to wait for).
    const bodiless = !hasBody(req);
    if (bodiless) exchange.phase = Phase.Waiting;
    if (socket.connecting) {
      socket.setTimeout(timeouts.connectMs);
      // To an https target the connection is ready once the TLS handshake is done, not at TCP connect:
      // a target that accepts TCP and never answers the handshake is one that cannot be reached.
      socket.once((socket as TLSSocket).encrypted ? 'secureConnect' : 'connect', () => {
        exchange.connected = true;
        socket.setTimeout(exchange.phase === Phase.Waiting ? timeouts.responseMs : timeouts.idleMs);
      });
    } else {
      exchange.connected = true;
      socket.setTimeout(bodiless ? timeouts.responseMs : timeouts.idleMs);
    }
    proxyReq.on('timeout', () => this.onTimeout(exchange));
    // With a listener Node hands a 101 over instead of dropping the connection without a word.
    proxyReq.on('upgrade', (proxyRes: IncomingMessage, upstream: Socket, head: Buffer) => this.onSwitch(exchange, proxyRes, upstream, head));
    if (bodiless) return;
    proxyReq.once('finish', () => {
      // The whole request body is sent: now the upstream's own time to answer runs.
      if (exchange.phase !== Phase.Sending) return;
      exchange.phase = Phase.Waiting;
      if (!socket.connecting) socket.setTimeout(timeouts.responseMs);
    });
  }

  private onTimeout(exchange: Exchange): void {
    if (exchange.res.writableFinished || exchange.res.destroyed) {
      // The answer is out. A request body still coming (the upstream answered early) that stalls is
      // ended on both sides; otherwise the exchange is over and the socket may be pooled: nothing to do.
      const proxyReq = exchange.proxyReq;
      if (proxyReq && !proxyReq.writableFinished) {
        proxyReq.destroy();
        exchange.res.req.socket.destroy();
      }
      return;
    }
    const { timeouts } = exchange.options;
    const name = exchange.upstream.name;
    if (exchange.phase === Phase.Streaming) {
      // A response body that stalls (no bytes for idleMs) is cut, so a stuck upstream cannot hold the client forever.
      exchange.outcome.cut = 'response_idle';
      this.onUpstreamError(exchange.upstream.name, 'timeout');
      exchange.proxyRes?.destroy();
      exchange.res.destroy();
      return;
    }
    if (!exchange.connected) {
      exchange.failure = { status: 504, code: 'gateway_timeout', detail: `the ${name} service could not be reached within ${timeouts.connectMs} ms` };
    } else if (exchange.phase === Phase.Waiting || !hasBody(exchange.res.req)) {
      exchange.failure = { status: 504, code: 'gateway_timeout', detail: `the ${name} service did not answer within ${timeouts.responseMs} ms` };
    } else if (exchange.proxyReq?.writableNeedDrain) {
      // Sending, and the upstream stopped reading the body.
      exchange.failure = { status: 504, code: 'gateway_timeout', detail: `the ${name} service stopped reading the request body for ${timeouts.idleMs} ms` };
    } else {
      // Sending, and the client stopped sending its body.
      exchange.failure = { status: 408, code: 'request_timeout', detail: `no bytes of the request body arrived for ${timeouts.idleMs} ms` };
    }
    exchange.proxyReq?.destroy();
  }

  /**
   * Writes the upstream's response: its end-to-end headers in one writeHead (Node frames the client's
   * response by the client's protocol: chunked, a length, or for HTTP/1.0 the connection's end), the
   * request id, and Location headers that point at the upstream made to point at the gateway.
   */
  private onResponse(proxyRes: IncomingMessage, exchange: Exchange): void {
    const res = exchange.res;
    if (res.headersSent || res.destroyed) {
      proxyRes.destroy();
      return;
    }
    const status = proxyRes.statusCode ?? 0;
    if (status < 100 || status > 999) {
      // Node's client parses any three digits; writeHead would throw on them, outside any handler.
      proxyRes.destroy();
      this.answer(exchange, { status: 502, code: 'bad_gateway', detail: `the ${exchange.upstream.name} service answered with an invalid status` });
      this.onUpstreamError(exchange.upstream.name, 'reset');
      return;
    }
    exchange.phase = Phase.Streaming;
    exchange.proxyRes = proxyRes;
    exchange.proxyReq?.socket?.setTimeout(exchange.options.timeouts.idleMs);
    const headers = endToEndHeaders(proxyRes.headers);
    if (headers.location !== undefined || headers['content-location'] !== undefined) this.rewriteLocations(headers, exchange);
    headers['x-request-id'] = exchange.outcome.requestId;
    try {
      res.writeHead(status, proxyRes.statusMessage, headers);
    } catch {
      // Whatever else the client parser accepts and writeHead refuses: the upstream's fault, a 502.
      proxyRes.destroy();
      for (const name of res.getHeaderNames()) if (name !== 'x-request-id') res.removeHeader(name);
      this.answer(exchange, { status: 502, code: 'bad_gateway', detail: `the ${exchange.upstream.name} service answered with an invalid response head` });
      this.onUpstreamError(exchange.upstream.name, 'reset');
      return;
    }
    proxyRes.pipe(res);
    // The upstream answered before the body was all sent (a 413, an early 200): the rest of the body may
    // still come, but Node stops timing the upstream request once its response ends. From the end of the
    // answer the client's socket carries the idle limit (after Node's own finish handler, which sets the
    // keep-alive timeout; the shorter of the two stays): Node ends a socket that stays silent that long,
    // and the upstream request goes with it.
    const proxyReq = exchange.proxyReq;
    if (proxyReq && !proxyReq.writableFinished) {
      res.once('finish', () => {
        const socket = res.req.socket;
        const idleMs = exchange.options.timeouts.idleMs;
        if (!res.req.complete && (!socket.timeout || idleMs < socket.timeout)) socket.setTimeout(idleMs);
      });
    }
    // An upstream that dies (or is cut) mid-body must not leave the client waiting for the rest.
    proxyRes.on('close', () => {
      if (proxyRes.complete) return;
      if (exchange.outcome.cut === undefined) this.onUpstreamError(exchange.upstream.name, 'reset');
      exchange.outcome.cut ??= 'upstream_closed';
      res.destroy();
    });
  }

  /**
   * The upstream answered `101 Switching Protocols`. Tunnelled only for a handshake whose hand-off
   * accepts this 101 (see SwitchHandler); a 101 to a plain request, or a 101 the handshake refuses, is
   * the upstream's fault: 502 at once, its connection closed.
   */
  private onSwitch(exchange: Exchange, proxyRes: IncomingMessage, upstream: Socket, upstreamHead: Buffer): void {
    upstream.on('error', () => upstream.destroy());
    upstream.setTimeout(0);
    const res = exchange.res;
    if (res.headersSent || res.destroyed) {
      upstream.destroy();
      return;
    }
    const name = exchange.upstream.name;
    const onSwitch = exchange.options.onSwitch;
    const refused = onSwitch
      ? onSwitch(proxyRes, upstream, upstreamHead)
      : `the ${name} service answered a request that asked for no upgrade with 101 Switching Protocols`;
    if (refused === undefined) {
      exchange.done();
      return;
    }
    upstream.destroy();
    this.log.warn('upstream switched protocols wrongly', { upstream: name, target: exchange.target.origin, status: 502, reason: refused });
    this.onUpstreamError(name, 'reset');
    res.shouldKeepAlive = false;
    this.answer(exchange, { status: 502, code: 'bad_gateway', detail: refused });
  }

  private rewriteLocations(headers: IncomingMessage['headers'], exchange: Exchange): void {
    const map: LocationMap = {
      upstreamOrigins: exchange.upstream.pool.origins,
      upstreamBasePath: exchange.target.basePath,
      routePrefix: exchange.options.strippedPrefix,
    };
    for (const name of ['location', 'content-location'] as const) {
      const value = headers[name];
      if (typeof value === 'string') headers[name] = rewriteLocation(value, map);
    }
  }

  private onError(err: Error, req: IncomingMessage, exchange: Exchange): void {
    if (exchange.outcome.cut) return;
    const code = (err as NodeJS.ErrnoException).code ?? '';
    // The client's own failures (its body stalled: 408) are not the upstream's.
    if (exchange.failure?.status !== 408) {
      this.onUpstreamError(exchange.upstream.name, exchange.failure ? 'timeout' : NOT_CONNECTED.has(code) ? 'refused' : 'reset');
    }
    if (this.retry(err as NodeJS.ErrnoException, req, exchange)) return;
    const failure = exchange.failure ?? { status: 502, code: 'bad_gateway' as const, detail: `the ${exchange.upstream.name} service is unavailable` };
    this.log.warn('upstream failed', { upstream: exchange.upstream.name, target: exchange.target.origin, status: failure.status, error: (err as NodeJS.ErrnoException).code ?? err.message });
    this.answer(exchange, failure);
  }

  /** The gateway's own answer in the upstream's place: a problem body, or a cut once a response began. */
  private answer(exchange: Exchange, failure: NonNullable<Exchange['failure']> | { status: 502; code: ProblemCode; detail: string }): void {
    const res = exchange.res;
    if (res.headersSent || res.destroyed) {
      exchange.outcome.cut ??= 'upstream_closed';
      res.destroy();
      return;
    }
    exchange.outcome.problem = failure.code;
    res.setHeader('X-Request-Id', exchange.outcome.requestId);
    writeProblem(res, new HttpProblem(failure.status, failure.code, failure.detail));
  }
}
