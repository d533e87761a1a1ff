import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { constants, type ClientHttp2Stream, type IncomingHttpHeaders as Http2Headers } from 'node:http2';
import { systemClock, type Clock } from '../clock.js';
import type { UpstreamConfig } from '../config/types.js';
import { encodeGrpcMessage, recordGrpcStatus } from '../core/grpc.js';
import { HttpProblem, type ProblemCode, writeProblem } from '../http/problem.js';
import type { Logger } from '../log.js';
import type { UpstreamCall } from '../core/exchange.js';
import type { ForwardOptions, ForwardOutcome, UpstreamErrorListener } from './forward.js';
import { grpcHealthProbe } from './grpc-health.js';
import { Base64Decoder, Base64Encoder, grpcWebOf, trailerFrame, type GrpcWeb } from './grpc-web.js';
import { CONNECT_TIMEOUT, TargetSessions, type PooledSession } from './h2-sessions.js';
import { rewriteLocation } from './location.js';
import { UpstreamPool, type Target } from './pool.js';
import { isPassedField, passedTrailers } from './trailers.js';

/**
 * Header names HTTP/2 forbids (RFC 9113 section 8.2.2; Node throws on them, `HTTP2-Settings` included),
 * and Host (`:authority` says it): never sent on an h2 hop. TE is set by the gateway (`trailers` only).
 */
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'http2-settings', 'host', 'te']);
/** The pseudo-headers requestHeaders sets itself (any other `:name` a header object carries is left out). */
const PSEUDO_SET = new Set([constants.HTTP2_HEADER_METHOD, constants.HTTP2_HEADER_PATH, constants.HTTP2_HEADER_SCHEME, constants.HTTP2_HEADER_AUTHORITY]);
/** What session.request throws when the session can take no new stream (GOAWAY, closed): nothing was sent. */
const SESSION_GONE = new Set(['ERR_HTTP2_GOAWAY_SESSION', 'ERR_HTTP2_INVALID_SESSION', 'ERR_HTTP2_OUT_OF_STREAMS']);
/** Methods a request may be sent again for, once it may have reached an upstream (RFC 9110 section 9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
/** Errors that mean the target did not take the connection. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', CONNECT_TIMEOUT]);
/**
 * A request body is kept this far (and no further) until its response begins, so a stream the peer
 * refused unprocessed (REFUSED_STREAM, or past a GOAWAY's last stream id) can be sent again elsewhere:
 * every gRPC unary call fits.
 */
const REPLAY_BYTES = 64 * 1024;
/** Attempts of one request at most (a refused stream is always safe to send again; a reset, once). */
const MAX_ATTEMPTS = 3;
/** `grpc-timeout`'s units (gRPC over HTTP/2, "Timeout"). */
const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const GRPC_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

interface Upstream {
  name: string;
  pool: UpstreamPool;
  preserveHost: boolean;
  /** One session pool per target (by Target). */
  sessions: Map<Target, TargetSessions>;
}

const enum Phase { Sending, Waiting, Streaming }

interface Failure {
  status: 408 | 502 | 504;
  code: ProblemCode;
  detail: string;
}

/** One forwarded request, across its attempts. */
interface Exchange {
  upstream: Upstream;
  target: Target;
  req: IncomingMessage;
  res: ServerResponse;
  options: ForwardOptions;
  outcome: ForwardOutcome;
  attempts: number;
  phase: Phase;
  /** Withdraws the request from its target's queue while it waits for a stream. */
  cancelWait?: () => void;
  stream?: ClientHttp2Stream;
  slot?: PooledSession;
  /** The request body so far while it may still be replayed; undefined once it may not. */
  replay: Buffer[] | undefined;
  replayBytes: number;
  /** The client's body has ended (req 'end'). */
  bodyEnded: boolean;
  /** The response head was written (or a trailers-only answer sent). */
  responded: boolean;
  /** Set when the gateway gave up (a timeout), before it resets the stream. */
  failure?: Failure;
  deadline?: NodeJS.Timeout;
  /** A gRPC call (`application/grpc…`, gRPC-Web's included). */
  grpc: boolean;
  /**
   * The header object the upstream gets: the one the upstream headers step built (a copy of the
   * request's for a caller without the pipeline), finished in place by requestHeaders at each attempt.
   */
  headers: OutgoingHttpHeaders;
  /** The current attempt's CLIENT span, when tracing is on (see endCall). */
  call: UpstreamCall | undefined;
  /**
   * The stream's time limit (see arm): the one timer, when it is due, the limit of the phase (responseMs
   * or idleMs) and when the stream was last active (performance.now()).
   */
  timer: NodeJS.Timeout | undefined;
  timerDue: number;
  limitMs: number;
  activeAt: number;
  /** A gRPC-Web call bridged to the gRPC upstream (see grpc-web.ts); its base64 codecs for the -text types. */
  web: GrpcWeb | undefined;
  decoder: Base64Decoder | undefined;
  encoder: Base64Encoder | undefined;
  done: () => void;
}

/**
 * Forwards requests to HTTP/2 upstreams (`protocol: h2c` or `h2`) with node:http2: the same contract
 * as the HTTP/1.1 Forwarder (admission, targets, balancing, health, timeouts, retries, header policy,
 * Location rewrite, problem bodies in the upstream's place) over pooled sessions (TargetSessions).
 * Any client protocol reaches it: the request's end-to-end headers become the stream's, its body the
 * stream's DATA, its trailers the stream's trailers; the response's HEADERS, DATA and trailers go back
 * the same way (an HTTP/1.1 client gets the trailers on a chunked body). A response that is only
 * trailers (gRPC's error answers) stays one: its headers and END_STREAM in one frame to an h2 client.
 * `grpc-timeout` bounds the call on top of the route's timeouts.
 */
export class Http2Forwarder {
  private readonly upstreams = new Map<string, Upstream>();
  private inFlight = 0;
  private retired = false;
  private closed = false;

  constructor(
    upstreams: Record<string, UpstreamConfig>,
    private readonly log: Logger,
    private readonly onUpstreamError: UpstreamErrorListener = () => {},
    /** What the pools' cool-downs are judged by (the stream timers are the event loop's own). */
    private readonly clock: Clock = systemClock,
  ) {
    for (const [name, u] of Object.entries(upstreams)) {
      const sessions = new Map<Target, TargetSessions>();
      const probe = grpcHealthProbe(u);
      const pool = new UpstreamPool(name, u, log, probe);
      for (const target of pool.targets) sessions.set(target, new TargetSessions({ origin: target.origin, ca: pool.ca, maxStreams: u.maxConnections }));
      this.upstreams.set(name, { name, pool, preserveHost: u.preserveHost, sessions });
    }
  }
  /** Requests waiting for a stream, per upstream (the upstream_queued gauge). */
  queued(): Array<[string, number]> {
    return [...this.upstreams.values()].map((u) => [u.name, [...u.sessions.values()].reduce((n, s) => n + s.queued, 0)]);
  }


  /** Forwards req (url and headers already rewritten); settles when the response is done or the client left. */
  forward(req: IncomingMessage, res: ServerResponse, options: ForwardOptions, outcome: ForwardOutcome): Promise<void> {
    const upstream = this.upstreams.get(options.upstream)!;
    const target = upstream.pool.pick(this.clock.now());
    if (!target) throw upstream.pool.busy();
    return new Promise((resolve) => {
      let over = false;
      const grpc = isGrpc(req);
      const ex: Exchange = {
        upstream, target, req, res, options, outcome, attempts: 0, phase: Phase.Sending,
        replay: [], replayBytes: 0, bodyEnded: false, responded: false,
        grpc, timer: undefined, timerDue: 0, limitMs: 0, activeAt: 0,
        headers: outcome.upstreamHeaders ?? { ...req.headers }, call: undefined,
        // Only a gRPC content type can be gRPC-Web's.
        web: grpc ? grpcWebOf(req) : undefined, decoder: undefined, encoder: undefined,
        done: () => {
          if (over) return;
          over = true;
          clearTimeout(ex.deadline);
          // A call withdrawn while it waited for a stream has no stream to end its span.
          if (ex.call) this.endCall(ex, ex.failure ? 'timeout' : ex.outcome.cut);
          ex.target.inFlight--;
          if (--this.inFlight === 0 && this.retired) this.close();
          resolve();
        },
      };
      if (ex.web?.text) {
        ex.decoder = new Base64Decoder();
        ex.encoder = new Base64Encoder();
      }
      target.inFlight++;
      this.inFlight++;
      res.on('close', () => this.clientGone(ex));
      this.readBody(ex);
      this.startDeadline(ex);
      this.attempt(ex);
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const u of this.upstreams.values()) {
      u.pool.close();
      for (const s of u.sessions.values()) s.close();
    }
  }

  /** A reload replaced this Forwarder: it closes its sessions once the exchanges it still carries are done. */
  retire(): void {
    this.retired = true;
    if (this.inFlight === 0) this.close();
  }

  /** The client left (or was cut) before the response finished: the upstream stream is cancelled. */
  private clientGone(ex: Exchange): void {
    if (!ex.res.writableFinished) {
      ex.outcome.cut ??= 'client_closed';
      ex.cancelWait?.();
      if (ex.stream && !ex.stream.destroyed) ex.stream.close(constants.NGHTTP2_CANCEL);
    } else if (ex.stream && !ex.stream.destroyed && !ex.stream.writableFinished) {
      // Answered before the body was all sent: the rest is for nobody.
      ex.stream.close(constants.NGHTTP2_CANCEL);
    }
    ex.done();
  }

  /**
   * The request body, read by hand rather than piped: each chunk goes to the current attempt's stream
   * (with its backpressure) and, while the response has not begun and the body is small, into the
   * replay buffer a retried attempt starts with. A body that arrives before any stream waits paused.
   */
  private readBody(ex: Exchange): void {
    const req = ex.req;
    if (!hasBody(req)) {
      ex.bodyEnded = true;
      return;
    }
    req.pause();
    req.on('data', (raw: Buffer) => {
      const chunk = ex.decoder ? ex.decoder.push(raw) : raw;
      if (chunk.length === 0) return;
      if (ex.replay) {
        ex.replayBytes += chunk.length;
        if (ex.replayBytes > REPLAY_BYTES) ex.replay = undefined;
        else ex.replay.push(chunk);
      }
      const stream = ex.stream;
      if (!stream || stream.destroyed) {
        req.pause();
        return;
      }
      ex.activeAt = performance.now();
      if (!stream.write(chunk)) {
        req.pause();
        stream.once('drain', () => req.resume());
      }
    });
    req.once('end', () => {
      ex.bodyEnded = true;
      if (ex.stream && !ex.stream.destroyed) ex.stream.end();
    });
    req.on('error', () => {
      // The client's connection failed mid-body: its response closes too (clientGone).
    });
  }

  /** `grpc-timeout`: the call ends by then whatever the route's timeouts say (they still apply). */
  private startDeadline(ex: Exchange): void {
    const value = ex.req.headers['grpc-timeout'];
    const m = typeof value === 'string' ? GRPC_TIMEOUT.exec(value) : null;
    if (!m) return;
    const ms = Math.max(1, Math.ceil(Number(m[1]) * GRPC_UNIT_MS[m[2]!]!));
    ex.deadline = setTimeout(() => {
      const detail = `the ${ex.upstream.name} service did not finish within the call's grpc-timeout (${value})`;
      ex.failure = { status: 504, code: 'gateway_timeout', detail };
      this.onUpstreamError(ex.upstream.name, 'timeout');
      if (ex.responded) {
        endGrpc(ex, 4, detail);
        ex.stream?.close(constants.NGHTTP2_CANCEL);
        return;
      }
      ex.cancelWait?.();
      ex.stream?.close(constants.NGHTTP2_CANCEL);
      this.answer(ex, ex.failure);
    }, ms);
    ex.deadline.unref();
  }

  /** One attempt on ex.target: wait for a stream slot, then open the stream. */
  private attempt(ex: Exchange): void {
    ex.attempts++;
    ex.phase = Phase.Sending;
    // Tracing (src/tracing): a CLIENT span per attempt, whose traceparent the upstream receives.
    const req = ex.req;
    ex.call = ex.outcome.trace?.upstreamCall(ex.headers as IncomingHttpHeaders, req.method!, ex.target.origin, ex.target.basePath + req.url);
    const sessions = ex.upstream.sessions.get(ex.target)!;
    const now = sessions.takeNow();
    if (now) return this.open(ex, sessions, now);
    ex.cancelWait = sessions.take(ex.options.timeouts.connectMs, (err, slot) => {
      ex.cancelWait = undefined;
      if (ex.outcome.cut || ex.failure) {
        if (slot) sessions.release(slot);
        this.endCall(ex, ex.failure ? 'timeout' : ex.outcome.cut);
        return;
      }
      if (err || !slot) return this.failed(ex, err ?? new Error('no session'), false);
      this.open(ex, sessions, slot);
    });
  }

  private open(ex: Exchange, sessions: TargetSessions, slot: PooledSession): void {
    let stream: ClientHttp2Stream;
    const endStream = ex.bodyEnded && (ex.replay?.length ?? 0) === 0;
    // Trailers of the request can come only on a chunked HTTP/1.1 body or an HTTP/2 stream.
    const withTrailers = !endStream && (ex.req.httpVersionMajor === 2 || ex.req.headers['transfer-encoding'] !== undefined);
    try {
      stream = slot.session.request(requestHeaders(ex), { endStream, waitForTrailers: withTrailers });
    } catch (err) {
      sessions.release(slot);
      const code = (err as NodeJS.ErrnoException).code ?? '';
      // The session went away between the slot and the stream (GOAWAY): nothing was sent, try again.
      if (SESSION_GONE.has(code)) return this.failed(ex, err as Error, true);
      // A request HTTP/2 cannot carry (a header value Node refuses): the gateway's own failure to send it.
      this.log.warn('request not sendable over HTTP/2', { upstream: ex.upstream.name, error: code || (err as Error).message });
      this.endCall(ex, code || (err as Error).name, (err as Error).message);
      return this.answer(ex, { status: 502, code: 'bad_gateway', detail: `the request cannot be sent to the ${ex.upstream.name} service over HTTP/2` });
    }
    ex.stream = stream;
    ex.slot = slot;
    let released = false;
    let error: NodeJS.ErrnoException | undefined;
    const { timeouts } = ex.options;
    if (endStream) ex.phase = Phase.Waiting;
    this.arm(ex, stream, endStream ? timeouts.responseMs : timeouts.idleMs);
    stream.on('error', (err: NodeJS.ErrnoException) => {
      error = err;
    });
    if (withTrailers) {
      stream.on('wantTrailers', () => {
        // No trailers: an empty list ends the stream with an empty DATA frame (close() would reset it).
        stream.sendTrailers(passedTrailers(ex.req.trailers) ?? {});
      });
    }
    if (!endStream) {
      stream.on('finish', () => {
        if (ex.phase !== Phase.Sending) return;
        ex.phase = Phase.Waiting;
        this.arm(ex, stream, timeouts.responseMs);
      });
    }
    stream.on('headers', (headers: Http2Headers) => this.onInformational(ex, headers));
    stream.on('response', (headers: Http2Headers, flags: number) => this.onResponse(ex, stream, headers, flags));
    stream.once('close', () => {
      clearTimeout(ex.timer);
      ex.timer = undefined;
      if (!released) {
        released = true;
        sessions.release(slot);
      }
      if (ex.call && ex.stream === stream) this.endCall(ex, streamFailure(ex, stream, error), error?.message);
      this.onClose(ex, stream, error);
    });
    if (!endStream) {
      for (const chunk of ex.replay ?? []) stream.write(chunk);
      if (ex.bodyEnded) stream.end();
      else ex.req.resume();
    }
  }

  /**
   * The stream's time limit from now on: `limitMs` without activity (a phase's start, a chunk either
   * way). One timer per stream, looked at when it fires: activity only notes the time (ex.activeAt), and
   * the timer is made again only when it would fire too late. A stream's own setTimeout is refreshed on
   * every read and write, and made anew on every change of limit.
   */
  private arm(ex: Exchange, stream: ClientHttp2Stream, limitMs: number): void {
    const now = performance.now();
    ex.limitMs = limitMs;
    ex.activeAt = now;
    const due = now + limitMs;
    if (ex.timer !== undefined) {
      if (ex.timerDue <= due) return;
      clearTimeout(ex.timer);
    }
    this.startTimer(ex, stream, due, limitMs);
  }

  private startTimer(ex: Exchange, stream: ClientHttp2Stream, due: number, ms: number): void {
    ex.timerDue = due;
    ex.timer = setTimeout(() => {
      ex.timer = undefined;
      if (ex.stream !== stream || stream.destroyed) return;
      const now = performance.now();
      const until = ex.activeAt + ex.limitMs;
      if (until > now) return this.startTimer(ex, stream, until, until - now);
      this.onTimeout(ex, stream);
    }, Math.max(1, Math.ceil(ms)));
    ex.timer.unref();
  }

  /**
   * 103 Early Hints pass on to the client (HTTP/1.1 and HTTP/2 alike, never HTTP/1.0, which has no 1xx:
   * RFC 9110 section 15.2, as the HTTP/1.1 Forwarder); other 1xx are the hop's own.
   */
  private onInformational(ex: Exchange, headers: Http2Headers): void {
    ex.activeAt = performance.now();
    if (Number(headers[':status']) !== 103 || ex.responded) return;
    const req = ex.req;
    if (req.httpVersionMajor === 1 && req.httpVersionMinor === 0) return;
    const hints: Record<string, string | string[]> = {};
    for (const name of Object.keys(headers)) {
      const value = headers[name];
      if (value !== undefined && isPassedField(name)) hints[name] = value as string | string[];
    }
    if (hints.link !== undefined) ex.res.writeEarlyHints(hints);
  }

  private onResponse(ex: Exchange, stream: ClientHttp2Stream, headers: Http2Headers, flags: number): void {
    if (ex.stream === stream) ex.call?.answered(Number(headers[':status']));
    const res = ex.res;
    if (ex.failure || res.headersSent || res.destroyed) return;
    ex.responded = true;
    ex.replay = undefined;
    ex.phase = Phase.Streaming;
    this.arm(ex, stream, ex.options.timeouts.idleMs);
    const status = Number(headers[':status']);
    const out = responseHeaders(ex, headers);
    noteGrpcStatus(res, headers);
    if (flags & constants.NGHTTP2_FLAG_END_STREAM) {
      // Headers only (gRPC's trailers-only answers, HEAD, 204): one HEADERS frame with END_STREAM to an h2 client.
      for (const name of Object.keys(out)) res.setHeader(name, out[name]!);
      res.statusCode = status;
      res.end();
      return;
    }
    res.writeHead(status, out);
    let trailers: OutgoingHttpHeaders | undefined;
    const encoder = ex.encoder;
    stream.on('data', (chunk: Buffer) => {
      ex.activeAt = performance.now();
      if (!res.write(encoder ? encoder.push(chunk) : chunk)) {
        stream.pause();
        res.once('drain', () => stream.resume());
      }
    });
    stream.on('trailers', (t: Http2Headers) => {
      noteGrpcStatus(res, t);
      trailers = passedTrailers(t);
    });
    stream.once('end', () => {
      if (ex.web) return endWeb(ex, trailers ?? {});
      if (trailers) res.addTrailers(trailers);
      res.end();
    });
  }

  private onTimeout(ex: Exchange, stream: ClientHttp2Stream): void {
    if (ex.res.writableFinished || ex.res.destroyed) {
      // The answer is out; a request body still coming that stalls is ended.
      stream.close(constants.NGHTTP2_CANCEL);
      return;
    }
    const { timeouts } = ex.options;
    const name = ex.upstream.name;
    if (ex.phase === Phase.Streaming) {
      ex.outcome.cut = 'response_idle';
      this.onUpstreamError(name, 'timeout');
      stream.close(constants.NGHTTP2_CANCEL);
      ex.res.destroy();
      return;
    }
    if (ex.phase === Phase.Waiting) {
      ex.failure = { status: 504, code: 'gateway_timeout', detail: `the ${name} service did not answer within ${timeouts.responseMs} ms` };
    } else if (stream.writableNeedDrain) {
      ex.failure = { status: 504, code: 'gateway_timeout', detail: `the ${name} service stopped reading the request body for ${timeouts.idleMs} ms` };
    } else {
      ex.failure = { status: 408, code: 'request_timeout', detail: `no bytes of the request body arrived for ${timeouts.idleMs} ms` };
    }
    stream.close(constants.NGHTTP2_CANCEL);
  }

  /** The stream closed: the end of a complete answer, or a failure (before or after the answer began). */
  private onClose(ex: Exchange, stream: ClientHttp2Stream, error: NodeJS.ErrnoException | undefined): void {
    if (ex.stream === stream) ex.stream = undefined;
    const res = ex.res;
    if (ex.outcome.cut) return;
    if (ex.responded) {
      if (res.writableEnded) return;
      // The upstream went away mid-answer: a gRPC call ends with UNAVAILABLE, anything else is cut.
      ex.outcome.cut = 'upstream_closed';
      this.onUpstreamError(ex.upstream.name, 'reset');
      if (ex.grpc && !res.destroyed) endGrpc(ex, 14, `the ${ex.upstream.name} service closed the call mid-stream`);
      else res.destroy();
      return;
    }
    if (ex.failure) {
      if (ex.failure.status !== 408) this.onUpstreamError(ex.upstream.name, 'timeout');
      return this.answer(ex, ex.failure);
    }
    const unsent = stream.rstCode === constants.NGHTTP2_REFUSED_STREAM;
    this.failed(ex, error ?? Object.assign(new Error(`stream closed with code ${stream.rstCode}`), { code: 'ECONNRESET' }), unsent);
  }

  /**
   * An attempt failed before any answer: once more elsewhere when that is safe (a connection not made;
   * a stream the peer refused unprocessed, with its body still replayable; an idempotent request without
   * a body that got no answer), else 502 (504 for a connection not made in time).
   */
  private failed(ex: Exchange, err: NodeJS.ErrnoException, unsent: boolean): void {
    // No stream (a connection not made), or one refused before it was sent: its span ends here.
    this.endCall(ex, err.code ?? err.name, err.message);
    if (ex.outcome.cut || ex.failure) return;
    const code = err.code ?? '';
    const refused = NOT_CONNECTED.has(code);
    this.onUpstreamError(ex.upstream.name, code === CONNECT_TIMEOUT ? 'timeout' : refused ? 'refused' : 'reset');
    const pool = ex.upstream.pool;
    const now = this.clock.now();
    if (refused) pool.markDown(ex.target, now);
    const replayable = ex.replay !== undefined;
    // Never a body that is no longer whole: bytes of it went to a failed attempt and are gone.
    const whole = replayable || ex.replayBytes === 0;
    const safe = whole && (refused || unsent || (IDEMPOTENT.has(ex.req.method!) && !hasBody(ex.req)));
    if (safe && ex.attempts < (refused || unsent ? MAX_ATTEMPTS : 2)) {
      const next = pool.pick(now, ex.target);
      if (next && !(refused && next === ex.target)) {
        ex.target.inFlight--;
        ex.target = next;
        next.inFlight++;
        return this.attempt(ex);
      }
    }
    const name = ex.upstream.name;
    const failure: Failure = code === CONNECT_TIMEOUT
      ? { status: 504, code: 'gateway_timeout', detail: `the ${name} service could not be reached within ${ex.options.timeouts.connectMs} ms` }
      : { status: 502, code: 'bad_gateway', detail: `the ${name} service is unavailable` };
    this.log.warn('upstream failed', { upstream: name, target: ex.target.origin, status: failure.status, error: code || err.message });
    this.answer(ex, failure);
  }

  /** Ends the current attempt's CLIENT span (once), as failed when `type` says why. */
  private endCall(ex: Exchange, type?: string, message?: string): void {
    const call = ex.call;
    if (!call) return;
    ex.call = undefined;
    if (type !== undefined) call.failed(type, message);
    call.end();
  }

  /** The gateway's own answer in the upstream's place (a problem body, or its gRPC form), or a cut once a response began. */
  private answer(ex: Exchange, failure: Failure): void {
    const res = ex.res;
    if (res.headersSent || res.destroyed || res.writableEnded) {
      ex.outcome.cut ??= 'upstream_closed';
      res.destroy();
      return;
    }
    ex.outcome.problem = failure.code;
    res.setHeader('X-Request-Id', ex.outcome.requestId);
    // The client's body is not read any further: its connection closes after the answer (see writeProblem).
    writeProblem(res, new HttpProblem(failure.status, failure.code, failure.detail));
  }
}

/** Whether a request carries a body (its framing as Node parsed it; an HTTP/2 stream's is marked chunked, see http2.ts entry). */
function hasBody(req: IncomingMessage): boolean {
  const h = req.headers;
  return h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0');
}

/** A gRPC call (any `application/grpc…` content type, gRPC-Web's included). */
function isGrpc(req: IncomingMessage): boolean {
  const type = req.headers['content-type'];
  return typeof type === 'string' && type.startsWith('application/grpc');
}

/** The client asked for trailers (`TE: trailers`; the header policy removes TE itself, so its raw headers are read). */
function wantsTrailers(req: IncomingMessage): boolean {
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'te' && /(?:^|,)\s*trailers\s*(?:;|,|$)/i.test(raw[i + 1]!)) return true;
  }
  return false;
}

/**
 * The stream's header list: the request's end-to-end headers (the header policy's object, finished in
 * place as the HTTP/1.1 Forwarder finishes it: node:http2 copies it once more itself), the pseudo-headers
 * and the target's authority. A name HTTP/2 forbids is left out by its value (undefined is not sent).
 */
function requestHeaders(ex: Exchange): OutgoingHttpHeaders {
  const req = ex.req;
  // The header object the upstream headers step built on the exchange (see Exchange.headers): the
  // request's own headers are the client's, credentials and made-up identity headers included.
  const out = ex.headers;
  // The request's Host (an HTTP/2 client's :authority, see request-form), as the header object has it.
  const clientHost = req.headers.host;
  for (const name in out) {
    if ((name.charCodeAt(0) === 0x3a && !PSEUDO_SET.has(name)) || (CONNECTION_SPECIFIC.has(name) && out[name] !== undefined)) out[name] = undefined;
  }
  const target = ex.target;
  out[constants.HTTP2_HEADER_METHOD] = req.method;
  out[constants.HTTP2_HEADER_PATH] = target.basePath + req.url;
  out[constants.HTTP2_HEADER_SCHEME] = target.origin.startsWith('https:') ? 'https' : 'http';
  out[constants.HTTP2_HEADER_AUTHORITY] = ex.upstream.preserveHost && clientHost ? clientHost : target.request.host;
  // gRPC servers require it; any upstream may send trailers a client asked for.
  if (ex.grpc || wantsTrailers(req)) out.te = 'trailers';
  if (ex.web) {
    // The upstream speaks gRPC: its own content type, and a length only the binary form keeps.
    out['content-type'] = ex.web.upstreamType;
    if (ex.web.text) out['content-length'] = undefined;
  }
  return out;
}

/** The response's headers for the client: no pseudo-headers, the request id, Location pointing at the gateway. */
function responseHeaders(ex: Exchange, headers: Http2Headers): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  let locations = false;
  for (const name in headers) {
    if (name.charCodeAt(0) === 0x3a || CONNECTION_SPECIFIC.has(name)) continue;
    out[name] = headers[name];
    if (name === 'location' || name === 'content-location') locations = true;
  }
  out['x-request-id'] = ex.outcome.requestId;
  const type = out['content-type'];
  if (ex.web && typeof type === 'string' && type.startsWith('application/grpc')) {
    // The body changes: the trailers become its last frame (and base64 for -text), so no length.
    out['content-type'] = ex.web.clientType;
    delete out['content-length'];
  }
  if (locations) {
    const map = { upstreamOrigins: ex.upstream.pool.origins, upstreamBasePath: ex.target.basePath, routePrefix: ex.options.strippedPrefix };
    for (const name of ['location', 'content-location'] as const) {
      const value = out[name];
      if (typeof value === 'string') out[name] = rewriteLocation(value, map);
    }
  }
  return out;
}

/**
 * Why the attempt on this stream failed, for its CLIENT span (error.type): the stream's error, `timeout`
 * when the gateway gave up waiting, how the exchange was cut; undefined when it ended cleanly.
 */
function streamFailure(ex: Exchange, stream: ClientHttp2Stream, error: NodeJS.ErrnoException | undefined): string | undefined {
  if (error) return error.code ?? error.name;
  const code = stream.rstCode;
  if (code === undefined || code === constants.NGHTTP2_NO_ERROR) return undefined;
  if (ex.failure || ex.outcome.cut === 'response_idle') return 'timeout';
  return ex.outcome.cut ?? `http2_rst_${code}`;
}

/** The upstream's grpc-status, for the access line. */
function noteGrpcStatus(res: ServerResponse, headers: Http2Headers): void {
  const status = headers['grpc-status'];
  if (typeof status === 'string') recordGrpcStatus(res, status);
}

/** Ends a gRPC response that began with a status of the gateway's own in its trailers (gRPC-Web: its trailer frame). */
function endGrpc(ex: Exchange, status: number, message: string): void {
  const res = ex.res;
  if (res.writableEnded) return;
  recordGrpcStatus(res, status);
  const trailers = { 'grpc-status': String(status), 'grpc-message': encodeGrpcMessage(message) };
  if (ex.web) return endWeb(ex, trailers);
  res.addTrailers(trailers);
  res.end();
}

/** Ends a gRPC-Web response: the trailers as its last frame (base64 for -text, after the body's last bytes). */
function endWeb(ex: Exchange, trailers: OutgoingHttpHeaders): void {
  const frame = trailerFrame(trailers);
  const encoder = ex.encoder;
  ex.res.end(encoder ? encoder.push(frame) + encoder.end() : frame);
}
