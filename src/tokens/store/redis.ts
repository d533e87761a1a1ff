import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from '../../log.js';
import { LivenessCache } from './liveness-cache.js';
import { RevocationFeed } from './revocations.js';
import { CREATE_SESSION, HIT_COUNTER, PEEK_COUNTER, REVOKE, REVOKE_BY_REFRESH, ROTATE_REFRESH, TAKE_RATE } from './lua.js';
import { StoreUnavailableError, type Counter, type NewSession, type RateDecision, type RotateOutcome, type Rotation, type TokenStore } from './types.js';

export interface RedisStoreOptions {
  url: string;
  keyPrefix: string;
  /** A command that has not answered by then fails (and the request with it): fail fast, fail closed. */
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  /** How long a live-session answer may be reused (0: ask Redis every time); see LivenessCache. */
  livenessCacheMs: number;
}

interface Scripts {
  createSession(s: string, p: string, sub: string, hash: string, ttl: number, uv: string): Promise<number>;
  rotateRefresh(s: string, p: string, presented: string, next: string, ttl: number, graceMs: number, nowMs: number, channel: string, sid: string): Promise<[number, string?, string?]>;
  revokeSession(s: string, p: string, channel: string, sid: string): Promise<number>;
  revokeByRefresh(s: string, p: string, hash: string, channel: string, sid: string): Promise<number>;
  hitCounter(key: string, windowSeconds: number): Promise<[number, number]>;
  peekCounter(key: string): Promise<[number, number]>;
  takeRate(key: string, limit: number, windowMs: number): Promise<[number, number, number, number]>;
}

type ScriptedRedis = Redis & Scripts;

/** How often the subscriber connection proves it is alive. */
const HEARTBEAT_MS = 500;
const ROTATE_RESULTS = { 0: 'unknown', 2: 'grace', 3: 'reused' } as const;

export function redisClientOptions(o: RedisStoreOptions): RedisOptions {
  return {
    keyPrefix: o.keyPrefix,
    // Commands must not wait in a queue while Redis is down: the auth path fails fast and closed.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    // A command in flight when the connection drops must fail (503), never be replayed after the
    // reconnect: a replayed rotation would see its own work as reuse and revoke the session.
    autoResendUnfulfilledCommands: false,
    commandTimeout: o.commandTimeoutMs,
    connectTimeout: o.connectTimeoutMs,
    enableAutoPipelining: true,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
  };
}

/** The shared store: N gateway instances on one Redis see the same sessions and counters. */
export class RedisTokenStore implements TokenStore {
  readonly kind = 'redis';
  readonly client: ScriptedRedis;
  /** The connection that hears revocations; while it is down the liveness cache is off. */
  readonly subscriber: Redis;
  readonly liveness: LivenessCache;
  private readonly channel: string;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly revocations = new RevocationFeed();
  private outage = false;

  constructor(options: RedisStoreOptions, private readonly log: Logger) {
    const client = new Redis(options.url, redisClientOptions(options));
    client.defineCommand('createSession', { numberOfKeys: 2, lua: CREATE_SESSION });
    client.defineCommand('rotateRefresh', { numberOfKeys: 2, lua: ROTATE_REFRESH });
    client.defineCommand('revokeSession', { numberOfKeys: 2, lua: REVOKE });
    client.defineCommand('revokeByRefresh', { numberOfKeys: 2, lua: REVOKE_BY_REFRESH });
    client.defineCommand('hitCounter', { numberOfKeys: 1, lua: HIT_COUNTER });
    client.defineCommand('peekCounter', { numberOfKeys: 1, lua: PEEK_COUNTER });
    client.defineCommand('takeRate', { numberOfKeys: 1, lua: TAKE_RATE });
    this.client = client as ScriptedRedis;
    client.on('error', (err: Error) => this.onError(err));
    client.on('ready', () => this.onReady());

    this.channel = `${options.keyPrefix}revoked`;
    this.liveness = new LivenessCache(options.livenessCacheMs);
    this.subscriber = new Redis(options.url, { ...redisClientOptions(options), keyPrefix: '', autoResubscribe: false });
    this.subscriber.on('error', () => this.liveness.deactivate());
    for (const event of ['close', 'reconnecting', 'end']) this.subscriber.on(event, () => this.liveness.deactivate());
    this.subscriber.on('message', (_channel: string, sid: string) => {
      this.liveness.invalidate(sid);
      this.revocations.publish(sid);
    });
    this.subscriber.on('ready', () => {
      this.subscriber.subscribe(this.channel).then(() => this.liveness.activate(), () => this.dropSubscriber());
    });
    // An idle subscriber socket can die silently (NAT, load balancers): a PING that does not come back
    // in time turns the cache off and reconnects, so a dead channel never passes for a quiet one.
    this.heartbeat = setInterval(() => this.checkSubscriber(options.commandTimeoutMs), HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  private checkSubscriber(timeoutMs: number): void {
    if (this.subscriber.status !== 'ready') return;
    const timer = setTimeout(() => this.dropSubscriber(), timeoutMs);
    this.subscriber.ping().then(() => clearTimeout(timer), () => {
      clearTimeout(timer);
      this.dropSubscriber();
    });
  }

  private dropSubscriber(): void {
    this.liveness.deactivate();
    if (this.subscriber.status === 'ready') this.subscriber.disconnect(true);
  }

  /** Resolves when connected, or after `timeoutMs` with false; never throws. */
  async waitUntilReady(timeoutMs: number): Promise<boolean> {
    if (this.client.status === 'ready') return true;
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        resolve(ok);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.client.on('ready', onReady);
    });
  }

  createSession(sid: string, session: NewSession, ttlSeconds: number): Promise<void> {
    const [s, p] = sessionKeys(sid);
    return this.guard(async () => {
      await this.client.createSession(s, p, session.sub, session.refreshHash, ttlSeconds, session.uv);
    });
  }

  rotateRefresh(sid: string, r: Rotation): Promise<RotateOutcome> {
    const [s, p] = sessionKeys(sid);
    return this.guard(async () => {
      const [code, sub, uv] = await this.client.rotateRefresh(s, p, r.presentedHash, r.nextHash, r.ttlSeconds, r.graceMs, r.nowMs, this.channel, sid);
      // A session from before credential versions has none: it can match no user's version.
      if (code === 1 && typeof sub === 'string') return { result: 'rotated', sub, uv: typeof uv === 'string' ? uv : '' };
      if (code === 3) this.revoked(sid);
      return { result: ROTATE_RESULTS[code as 0 | 2 | 3] ?? 'unknown' };
    });
  }

  /** From the liveness cache while the invalidation channel is up; else one PTTL round trip. */
  async isLive(sid: string): Promise<boolean> {
    const now = Date.now();
    // Both connections must be up: a cached answer is no answer while Redis is unreachable.
    if (this.client.status === 'ready' && this.liveness.isLive(sid, now)) return true;
    const epoch = this.liveness.epoch;
    const ttlMs = await this.guard(() => this.client.pttl(sessionKeys(sid)[0]));
    if (ttlMs === -2) return false;
    this.liveness.remember(sid, now, ttlMs < 0 ? Number.MAX_SAFE_INTEGER : ttlMs, epoch);
    return true;
  }

  revoke(sid: string): Promise<void> {
    const [s, p] = sessionKeys(sid);
    this.liveness.invalidate(sid);
    return this.guard(async () => {
      await this.client.revokeSession(s, p, this.channel, sid);
      // Again after: a liveness lookup answered while the script ran must not stay cached.
      this.revoked(sid);
    });
  }

  revokeByRefresh(sid: string, refreshHash: string): Promise<boolean> {
    const [s, p] = sessionKeys(sid);
    return this.guard(async () => {
      const revoked = (await this.client.revokeByRefresh(s, p, refreshHash, this.channel, sid)) === 1;
      if (revoked) this.revoked(sid);
      return revoked;
    });
  }

  hit(key: string, windowSeconds: number): Promise<Counter> {
    return this.guard(async () => toCounter(await this.client.hitCounter(counterKey(key), windowSeconds)));
  }

  peek(key: string): Promise<Counter> {
    return this.guard(async () => toCounter(await this.client.peekCounter(counterKey(key))));
  }

  reset(key: string): Promise<void> {
    return this.guard(async () => {
      await this.client.del(counterKey(key));
    });
  }

  take(key: string, limit: number, windowSeconds: number): Promise<RateDecision> {
    return this.guard(async () => {
      const [allowed, remaining, resetMs, retryMs] = await this.client.takeRate(`r:{${key}}`, limit, windowSeconds * 1000);
      return { allowed: allowed === 1, remaining, resetSeconds: Math.ceil(resetMs / 1000), retryAfterSeconds: Math.ceil(retryMs / 1000) };
    });
  }

  onRevoked(listener: (sid: string) => void): () => void {
    return this.revocations.subscribe(listener);
  }

  ping(): Promise<void> {
    return this.guard(async () => {
      await this.client.ping();
    });
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    this.liveness.deactivate();
    await Promise.all([this.client, this.subscriber].map(async (c) => {
      if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
      else c.disconnect();
    }));
  }

  /**
   * This instance's own revocation, heard at once (the channel's copy of it may come later, or not at
   * all while the subscriber is down): listeners may hear a session twice, which they must tolerate.
   */
  private revoked(sid: string): void {
    this.liveness.invalidate(sid);
    this.revocations.publish(sid);
  }

  private async guard<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      throw new StoreUnavailableError(err);
    }
  }

  private onError(err: Error): void {
    if (this.outage) return;
    this.outage = true;
    this.log.error('redis unavailable; token checks fail closed until it returns', { error: err.message });
  }

  private onReady(): void {
    if (this.outage) this.log.info('redis available again');
    this.outage = false;
  }
}

function sessionKeys(sid: string): [string, string] {
  return [`{${sid}}:s`, `{${sid}}:p`];
}

function counterKey(key: string): string {
  return `c:{${key}}`;
}

function toCounter([count, resetSeconds]: [number, number]): Counter {
  return { count: Number(count), resetSeconds: Number(resetSeconds) };
}
