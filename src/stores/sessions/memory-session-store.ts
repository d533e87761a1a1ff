import { randomBytes } from 'node:crypto';
import type { Clock } from '../../clock.js';
import { sessionIdFor } from './user-index.js';
import { Listeners } from '../listeners.js';
import type { NewSession, RotateOutcome, Rotation, SessionDevice, SessionInfo, SessionStore } from './session-store.js';

interface Session {
  sub: string;
  createdAt: number;
  refreshedAt: number;
  uv: string;
  generation: number;
  expiresAt: number;
}

const SWEEP_INTERVAL_MS = 60_000;

/**
 * One process's sessions: the embedded default and the reference the Redis store is tested against.
 * Same semantics as the Lua scripts, one synchronous step per call.
 */
export class MemorySessionStore implements SessionStore {
  readonly kind = 'memory';
  private readonly sessions = new Map<string, Session>();
  /** user -> ids of their sessions (some may be gone: checked on read, dropped then). */
  private readonly byUser = new Map<string, Set<string>>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly revocations = new Listeners<string>();
  /** tag -> session id -> when the filing lapses (ms). */
  private readonly tagged = new Map<string, Map<string, number>>();
  /** marker -> when it is forgotten (ms). */
  private readonly markers = new Map<string, number>();
  /** user -> session id -> its device note and when the note lapses (ms). */
  private readonly devices = new Map<string, Map<string, { device: SessionDevice; until: number }>>();

  constructor(private readonly clock: Clock) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  async createSession(session: NewSession, ttlSeconds: number): Promise<string> {
    const sid = sessionIdFor(session.sub, 0, randomBytes(16).toString('base64url'));
    const now = this.clock.now();
    let ids = this.byUser.get(session.sub);
    if (!ids) this.byUser.set(session.sub, (ids = new Set()));
    ids.add(sid);
    this.sessions.set(sid, { sub: session.sub, createdAt: now, refreshedAt: now, uv: session.uv, generation: 0, expiresAt: now + ttlSeconds * 1000 });
    return sid;
  }

  /** As ROTATE_REFRESH in session-scripts.ts. */
  async rotateRefresh(sid: string, r: Rotation): Promise<RotateOutcome> {
    const session = this.liveSession(sid);
    if (!session) return { result: 'unknown' };
    const rotated = (generation: number, retry: boolean): RotateOutcome => ({ result: 'rotated', sub: session.sub, uv: session.uv, generation, retry });
    if (r.generation >= session.generation) {
      session.generation = r.generation + 1;
      session.refreshedAt = r.nowMs;
      session.expiresAt = this.clock.now() + r.ttlSeconds * 1000;
      return rotated(session.generation, false);
    }
    if (r.generation === session.generation - 1 && r.graceMs > 0) return rotated(session.generation, true);
    this.sessions.delete(sid);
    this.revocations.publish(sid);
    return { result: 'reused' };
  }

  async isLive(sid: string): Promise<boolean> {
    return this.liveSession(sid) !== undefined;
  }

  isLiveNow(sid: string): boolean {
    return this.liveSession(sid) !== undefined;
  }

  async revoke(sid: string): Promise<string | undefined> {
    const user = this.liveSession(sid)?.sub;
    this.sessions.delete(sid);
    this.revocations.publish(sid);
    return user;
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

  async tagSession(sid: string, tags: readonly string[], ttlSeconds: number): Promise<void> {
    const until = this.clock.now() + ttlSeconds * 1000;
    for (const tag of tags) {
      let sids = this.tagged.get(tag);
      if (!sids) this.tagged.set(tag, (sids = new Map()));
      sids.set(sid, until);
    }
  }

  async revokeTagged(tag: string): Promise<number> {
    const sids = this.tagged.get(tag);
    this.tagged.delete(tag);
    let count = 0;
    for (const sid of sids?.keys() ?? []) if ((await this.revoke(sid)) !== undefined) count++;
    return count;
  }

  async firstSighting(marker: string, ttlSeconds: number): Promise<boolean> {
    const now = this.clock.now();
    const until = this.markers.get(marker);
    if (until !== undefined && until > now) return false;
    this.markers.set(marker, now + Math.max(1, Math.ceil(ttlSeconds)) * 1000);
    return true;
  }

  async noteSessionDevice(sid: string, user: string, device: SessionDevice, ttlSeconds: number): Promise<void> {
    let notes = this.devices.get(user);
    if (!notes) this.devices.set(user, (notes = new Map()));
    notes.set(sid, { device: { ...device }, until: this.clock.now() + ttlSeconds * 1000 });
  }

  async sessionDevices(user: string): Promise<Map<string, SessionDevice>> {
    const now = this.clock.now();
    const found = new Map<string, SessionDevice>();
    for (const [sid, note] of this.devices.get(user) ?? []) if (note.until > now) found.set(sid, { ...note.device });
    return found;
  }

  onRevoked(listener: (sid: string) => void): () => void {
    return this.revocations.subscribe(listener);
  }

  async ping(): Promise<void> {}

  /** In this process: nothing to wait for, no replicas. */
  async waitUntilReady(): Promise<boolean> {
    return true;
  }

  replication(): undefined {
    return undefined;
  }

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

  private sweep(): void {
    const now = this.clock.now();
    for (const [sid, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(sid);
    for (const [user, ids] of this.byUser) {
      for (const sid of ids) if (!this.sessions.has(sid)) ids.delete(sid);
      if (ids.size === 0) this.byUser.delete(user);
    }
    for (const [marker, until] of this.markers) if (until <= now) this.markers.delete(marker);
    for (const [user, notes] of this.devices) {
      for (const [sid, note] of notes) if (note.until <= now) notes.delete(sid);
      if (notes.size === 0) this.devices.delete(user);
    }
    for (const [tag, sids] of this.tagged) {
      for (const [sid, until] of sids) if (until <= now) sids.delete(sid);
      if (sids.size === 0) this.tagged.delete(tag);
    }
  }
}
