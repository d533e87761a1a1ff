import type { Clock } from '../../clock.js';
import { ROTATED_KEPT } from './lua.js';
import { RevocationFeed } from './revocations.js';
import type { Counter, NewSession, RateDecision, RotateOutcome, Rotation, SessionInfo, TokenStore } from './types.js';

interface Session {
  sub: string;
  createdAt: number;
  refreshedAt: number;
  uv: string;
  current: string;
  /** Rotated-away hashes and when they were rotated away (ms). */
  previous: Map<string, number>;
  expiresAt: number;
}

interface StoredCounter {
  count: number;
  expiresAt: number;
}

const SWEEP_INTERVAL_MS = 60_000;

/**
 * One process's token store: the embedded default and the reference the Redis store is tested
 * against. Same semantics as the Lua scripts, one synchronous step per call.
 */
export class MemoryTokenStore implements TokenStore {
  readonly kind = 'memory';
  private readonly sessions = new Map<string, Session>();
  /** user -> ids of their sessions (some may be gone: checked on read, dropped then). */
  private readonly byUser = new Map<string, Set<string>>();
  private readonly counters = new Map<string, StoredCounter>();
  /** GCRA buckets: key -> theoretical arrival time (ms). */
  private readonly buckets = new Map<string, number>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly revocations = new RevocationFeed();

  constructor(private readonly clock: Clock) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  async createSession(sid: string, session: NewSession, ttlSeconds: number): Promise<void> {
    const now = this.clock.now();
    let ids = this.byUser.get(session.sub);
    if (!ids) this.byUser.set(session.sub, (ids = new Set()));
    ids.add(sid);
    this.sessions.set(sid, {
      sub: session.sub,
      createdAt: now,
      refreshedAt: now,
      uv: session.uv,
      current: session.refreshHash,
      previous: new Map(),
      expiresAt: this.clock.now() + ttlSeconds * 1000,
    });
  }

  async rotateRefresh(sid: string, r: Rotation): Promise<RotateOutcome> {
    const session = this.liveSession(sid);
    if (!session) return { result: 'unknown' };
    if (session.current === r.presentedHash) {
      session.previous.set(session.current, r.nowMs);
      if (session.previous.size > ROTATED_KEPT) session.previous.delete(session.previous.keys().next().value!);
      session.current = r.nextHash;
      session.refreshedAt = r.nowMs;
      session.expiresAt = this.clock.now() + r.ttlSeconds * 1000;
      return { result: 'rotated', sub: session.sub, uv: session.uv };
    }
    const rotatedAt = session.previous.get(r.presentedHash);
    if (rotatedAt === undefined) return { result: 'unknown' };
    if (r.nowMs - rotatedAt < r.graceMs) return { result: 'grace' };
    this.sessions.delete(sid);
    this.revocations.publish(sid);
    return { result: 'reused' };
  }

  async isLive(sid: string): Promise<boolean> {
    return this.liveSession(sid) !== undefined;
  }

  async revoke(sid: string): Promise<void> {
    this.sessions.delete(sid);
    this.revocations.publish(sid);
  }

  async revokeByRefresh(sid: string, refreshHash: string): Promise<boolean> {
    const session = this.liveSession(sid);
    if (!session) return false;
    if (session.current !== refreshHash && !session.previous.has(refreshHash)) return false;
    this.sessions.delete(sid);
    this.revocations.publish(sid);
    return true;
  }

  async listSessions(user: string): Promise<SessionInfo[]> {
    const ids = this.byUser.get(user);
    if (!ids) return [];
    const live: SessionInfo[] = [];
    for (const sid of ids) {
      const s = this.liveSession(sid);
      if (s && s.sub === user) live.push({ sid, createdAtMs: s.createdAt, refreshedAtMs: s.refreshedAt });
      else ids.delete(sid);
    }
    if (ids.size === 0) this.byUser.delete(user);
    return live.sort((a, b) => a.createdAtMs - b.createdAtMs);
  }

  async revokeUser(user: string): Promise<number> {
    const ids = this.byUser.get(user);
    this.byUser.delete(user);
    let count = 0;
    for (const sid of ids ?? []) {
      if (this.liveSession(sid)?.sub !== user) continue;
      this.sessions.delete(sid);
      this.revocations.publish(sid);
      count++;
    }
    return count;
  }

  async hit(key: string, windowSeconds: number): Promise<Counter> {
    const now = this.clock.now();
    let counter = this.liveCounter(key, now);
    if (!counter) {
      counter = { count: 0, expiresAt: now + windowSeconds * 1000 };
      this.counters.set(key, counter);
    }
    counter.count += 1;
    return { count: counter.count, resetSeconds: Math.ceil((counter.expiresAt - now) / 1000) };
  }

  async peek(key: string): Promise<Counter> {
    const now = this.clock.now();
    const counter = this.liveCounter(key, now);
    if (!counter) return { count: 0, resetSeconds: 0 };
    return { count: counter.count, resetSeconds: Math.ceil((counter.expiresAt - now) / 1000) };
  }

  async reset(key: string): Promise<void> {
    this.counters.delete(key);
  }

  async take(key: string, limit: number, windowSeconds: number): Promise<RateDecision> {
    const now = this.clock.now();
    const period = windowSeconds * 1000;
    const interval = period / limit;
    const tat = Math.max(this.buckets.get(key) ?? 0, now);
    const next = tat + interval;
    if (next - now > period) {
      return { allowed: false, remaining: 0, resetSeconds: Math.ceil((tat - now) / 1000), retryAfterSeconds: Math.ceil((next - period - now) / 1000) };
    }
    this.buckets.set(key, next);
    return { allowed: true, remaining: Math.floor((period - (next - now)) / interval), resetSeconds: Math.ceil((next - now) / 1000), retryAfterSeconds: 0 };
  }

  onRevoked(listener: (sid: string) => void): () => void {
    return this.revocations.subscribe(listener);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }

  private liveSession(sid: string): Session | undefined {
    const session = this.sessions.get(sid);
    if (session && session.expiresAt <= this.clock.now()) {
      this.sessions.delete(sid);
      return undefined;
    }
    return session;
  }

  private liveCounter(key: string, now: number): StoredCounter | undefined {
    const counter = this.counters.get(key);
    if (counter && counter.expiresAt <= now) {
      this.counters.delete(key);
      return undefined;
    }
    return counter;
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const [sid, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(sid);
    for (const [user, ids] of this.byUser) {
      for (const sid of ids) if (!this.sessions.has(sid)) ids.delete(sid);
      if (ids.size === 0) this.byUser.delete(user);
    }
    for (const [key, c] of this.counters) if (c.expiresAt <= now) this.counters.delete(key);
    for (const [key, tat] of this.buckets) if (tat <= now) this.buckets.delete(key);
  }
}
