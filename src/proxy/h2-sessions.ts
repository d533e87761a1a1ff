import { connect, type ClientHttp2Session } from 'node:http2';
import { isIP } from 'node:net';

/** A pooled connection without a stream for this long is closed (the next request opens another). */
const SESSION_IDLE_MS = 30_000;
/** Streams a connection is given at most, whatever its peer allows (its SETTINGS_MAX_CONCURRENT_STREAMS). */
const MAX_STREAMS_PER_SESSION = 1000;

/** The code a waiter's error has when the connection was not made within connectMs. */
export const CONNECT_TIMEOUT = 'ERR_UPSTREAM_CONNECT_TIMEOUT';

/** One HTTP/2 connection to a target, and the streams it carries now. */
export interface PooledSession {
  readonly session: ClientHttp2Session;
  /** Streams given out and not yet released. */
  active: number;
  /** Connected (its SETTINGS exchanged or on their way). */
  ready: boolean;
  /** GOAWAY received, or closing: it takes no new stream, its streams finish. */
  gone: boolean;
  /** When it last had no stream (performance.now()): connected, or its last stream released. */
  idleSince: number;
  /** Closes it once it has had no stream for SESSION_IDLE_MS (see watchIdle). */
  idleTimer: NodeJS.Timeout | undefined;
}

/** Called once: with a session that has room for one more stream (taken: release it), or why none came. */
export type Waiter = (err: NodeJS.ErrnoException | undefined, session?: PooledSession) => void;

/** How a target's connections are made. */
export interface SessionOptions {
  /** `http://host:port` (h2c, prior knowledge) or `https://host:port` (h2, ALPN). */
  origin: string;
  /** The CAs an https target's certificate may chain to; undefined: Node's. */
  ca: string[] | undefined;
  /** Streams in progress to the target at most (upstreams.<name>.maxConnections). */
  maxStreams: number;
}

/**
 * The HTTP/2 connections to one target: one, and another only when each open one has as many streams
 * as its peer allows. A request takes a stream slot (take) and gives it back when its stream closes
 * (release); with `maxStreams` slots in use across the target's connections, requests wait in order.
 * A connection that receives GOAWAY takes no new streams (its own finish on it, then it closes): the
 * requests still waiting, and those the peer refused unprocessed, go to a new connection. A connection
 * that fails before it is up fails every request waiting then (each decides whether to retry).
 */
export class TargetSessions {
  private readonly sessions: PooledSession[] = [];
  private readonly waiting: { waiter: Waiter; connectMs: number }[] = [];

  /** Requests waiting for a stream of one of these connections (the upstream_queued gauge). */
  get queued(): number {
    return this.waiting.length;
  }
  /** Slots in use across the target's connections. */
  private active = 0;
  private connecting = false;
  private closed = false;

  constructor(private readonly options: SessionOptions) {}

  /** Streams in progress (for tests and metrics). */
  get inUse(): number {
    return this.active;
  }

  /** Open connections (for tests). */
  get size(): number {
    return this.sessions.length;
  }

  /**
   * A stream slot at once, when nobody is waiting and an open connection has room (taken: release it);
   * undefined otherwise (then take()). The common case costs no waiter and no withdrawal function.
   */
  takeNow(): PooledSession | undefined {
    if (this.waiting.length > 0 || this.active >= this.options.maxStreams || this.closed) return undefined;
    const pooled = this.withRoom();
    if (pooled) {
      pooled.active++;
      this.active++;
    }
    return pooled;
  }

  /** Asks for a stream slot; returns how to withdraw the request while it still waits. */
  take(connectMs: number, waiter: Waiter): () => void {
    const entry = { waiter, connectMs };
    if (this.closed) {
      waiter(Object.assign(new Error('the upstream pool is closed'), { code: 'ERR_HTTP2_INVALID_SESSION' }));
      return () => {};
    }
    this.waiting.push(entry);
    this.pump();
    return () => {
      const i = this.waiting.indexOf(entry);
      if (i >= 0) this.waiting.splice(i, 1);
    };
  }

  /** A stream given out by take() is closed. */
  release(pooled: PooledSession): void {
    if (--pooled.active === 0) pooled.idleSince = performance.now();
    this.active--;
    if (pooled.gone && pooled.active === 0 && !pooled.session.closed) pooled.session.close();
    this.pump();
  }

  close(): void {
    this.closed = true;
    for (const pooled of this.sessions) pooled.session.destroy();
    this.failWaiting(Object.assign(new Error('the upstream pool is closed'), { code: 'ERR_HTTP2_INVALID_SESSION' }));
  }

  /** Gives waiting requests the free slots, opening a connection when every open one is full. */
  private pump(): void {
    while (this.waiting.length > 0 && this.active < this.options.maxStreams) {
      const pooled = this.withRoom();
      if (!pooled) {
        if (!this.connecting && !this.closed) this.open(this.waiting[0]!.connectMs);
        return;
      }
      const { waiter } = this.waiting.shift()!;
      pooled.active++;
      this.active++;
      waiter(undefined, pooled);
    }
  }

  private withRoom(): PooledSession | undefined {
    for (const pooled of this.sessions) {
      if (!pooled.ready || pooled.gone || pooled.session.destroyed || pooled.session.closed) continue;
      const allowed = Math.min(pooled.session.remoteSettings.maxConcurrentStreams ?? MAX_STREAMS_PER_SESSION, MAX_STREAMS_PER_SESSION);
      if (pooled.active < allowed) return pooled;
    }
    return undefined;
  }

  private open(connectMs: number): void {
    this.connecting = true;
    const host = new URL(this.options.origin).hostname.replace(/^\[|\]$/g, '');
    const session = connect(this.options.origin, {
      ...(this.options.ca ? { ca: this.options.ca } : {}),
      // No SNI for an address (RFC 6066); the certificate is still checked against it.
      ...(isIP(host) ? { servername: '' } : {}),
      settings: { enablePush: false },
    });
    const pooled: PooledSession = { session, active: 0, ready: false, gone: false, idleSince: 0, idleTimer: undefined };
    this.sessions.push(pooled);
    let failure: NodeJS.ErrnoException | undefined;
    const timer = setTimeout(() => {
      failure = Object.assign(new Error(`no connection within ${connectMs} ms`), { code: CONNECT_TIMEOUT });
      session.destroy();
    }, connectMs);
    session.once('connect', () => {
      clearTimeout(timer);
      this.connecting = false;
      pooled.ready = true;
      pooled.idleSince = performance.now();
      this.watchIdle(pooled, SESSION_IDLE_MS);
      this.pump();
    });
    // Without an 'error' listener a failed connection would take the process down; its streams hear of it themselves.
    session.on('error', (err: NodeJS.ErrnoException) => {
      failure ??= err;
    });
    session.on('remoteSettings', () => this.pump());
    session.once('goaway', () => {
      pooled.gone = true;
      if (pooled.active === 0) session.close();
      this.pump();
    });
    session.once('close', () => {
      clearTimeout(timer);
      clearTimeout(pooled.idleTimer);
      pooled.gone = true;
      const i = this.sessions.indexOf(pooled);
      if (i >= 0) this.sessions.splice(i, 1);
      if (!pooled.ready) {
        this.connecting = false;
        this.failWaiting(failure ?? Object.assign(new Error('the connection closed before it was up'), { code: 'ECONNRESET' }));
        return;
      }
      this.pump();
    });
  }

  /**
   * Closes a connection once it has had no stream for SESSION_IDLE_MS. One timer per connection, looked
   * at when it fires rather than moved with every stream (a session's own setTimeout is refreshed by
   * every frame read or written).
   */
  private watchIdle(pooled: PooledSession, ms: number): void {
    pooled.idleTimer = setTimeout(() => {
      if (pooled.gone || pooled.session.destroyed) return;
      const idleFor = pooled.active > 0 ? 0 : performance.now() - pooled.idleSince;
      if (idleFor < SESSION_IDLE_MS) return this.watchIdle(pooled, SESSION_IDLE_MS - idleFor);
      pooled.gone = true;
      pooled.session.close();
    }, Math.max(1, ms));
    pooled.idleTimer.unref();
  }

  private failWaiting(err: NodeJS.ErrnoException): void {
    for (const { waiter } of this.waiting.splice(0)) waiter(err);
  }
}
