import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { RedisStoreConfig } from '../../config/types.js';
import type { Logger } from '../../log.js';
import { enforceDeadlines, withDeadline } from './deadline.js';
import { LivenessCache } from './liveness-cache.js';
import {
  CREATE_SESSION, HIT_COUNTER, INDEX_ADD, INDEX_TOUCH, PEEK_COUNTER, REVOKE, REVOKE_BY_REFRESH, ROTATE_REFRESH, TAKE_RATE,
} from './lua.js';
import { OutageLog } from './outage-log.js';
import { RevocationChannel } from './revocation-channel.js';
import { RevocationFeed } from './revocations.js';
import { readSessionRecord, refreshDigest } from './session-record.js';
import { connect } from './topology.js';
import {
  StoreUnavailableError, type Counter, type NewSession, type RateDecision, type RotateOutcome, type Rotation, type SessionInfo, type TokenStore,
} from './types.js';

export type RedisStoreOptions = Omit<RedisStoreConfig, 'kind'>;

interface Scripts {
  createSession(s: string, digest: Buffer, ttl: number, sub: string, uv: string): Promise<number>;
  rotateRefresh(s: string, presented: Buffer, next: Buffer, ttl: number, graceMs: number, nowMs: number, channel: string, sid: string): Promise<[number, string?, string?]>;
  revokeSession(s: string, channel: string, sid: string): Promise<number>;
  revokeByRefresh(s: string, digest: Buffer, channel: string, sid: string): Promise<number>;
  indexAdd(index: string, sid: string, createdAtMs: number, ttl: number): Promise<number>;
  indexTouch(index: string, ttl: number): Promise<number>;
  hitCounter(key: string, windowSeconds: number): Promise<[number, number]>;
  peekCounter(key: string): Promise<[number, number]>;
  takeRate(key: string, limit: number, windowMs: number): Promise<[number, number, number, number]>;
}

type Scripted = (Redis | Cluster) & Scripts;

/** How often each revocation listener proves it is alive. */
export const HEARTBEAT_MS = 100;
/**
 * A cache hit needs a heartbeat confirmation younger than this, and a revoking instance waits this long
 * before it answers (see LivenessCache): the price of synchronous revocation, paid by revocations only.
 */
export const REVOCATION_WAIT_MS = 3 * HEARTBEAT_MS;
/** Past this many ids in a user's index, each new session checks a few at random and drops dead ones. */
const INDEX_PRUNE_ABOVE = 8;
const INDEX_PRUNE_SAMPLE = 4;
const ROTATE_RESULTS = { 0: 'unknown', 2: 'grace', 3: 'reused' } as const;
const monotonic = () => performance.now();

const SCRIPTS: Array<[keyof Scripts, number, string]> = [
  ['createSession', 1, CREATE_SESSION],
  ['rotateRefresh', 1, ROTATE_REFRESH],
  ['revokeSession', 1, REVOKE],
  ['revokeByRefresh', 1, REVOKE_BY_REFRESH],
  ['indexAdd', 1, INDEX_ADD],
  ['indexTouch', 1, INDEX_TOUCH],
  ['hitCounter', 1, HIT_COUNTER],
  ['peekCounter', 1, PEEK_COUNTER],
  ['takeRate', 1, TAKE_RATE],
];

function withScripts<T extends Redis | Cluster>(client: T): T & Scripts {
  for (const [name, numberOfKeys, lua] of SCRIPTS) client.defineCommand(name, { numberOfKeys, lua });
  return client as T & Scripts;
}

/**
 * The shared store on a single node, a Sentinel-managed master or a Redis Cluster: N gateway instances
 * see the same sessions and counters. Every command has a hard deadline (commandTimeoutMs) and fails
 * with StoreUnavailableError; nothing is queued or replayed.
 */
export class RedisTokenStore implements TokenStore {
  readonly kind = 'redis';
  readonly client: Scripted;
  /** Session writes that must reach replicas (WAIT) go on their own connection, so a WAIT never holds up reads. */
  private readonly writer: Scripted;
  readonly liveness: LivenessCache;
  readonly channel: RevocationChannel;
  private readonly channelName: string;
  private readonly outage: OutageLog;
  private readonly revocationWaitMs: number;
  private readonly revocations = new RevocationFeed();

  constructor(private readonly options: RedisStoreOptions, log: Logger) {
    const connections = connect(options.topology, options);
    this.client = withScripts(connections.client);
    enforceDeadlines(this.client, options.commandTimeoutMs);
    this.writer = this.client;
    if (options.waitForReplicas > 0) {
      this.writer = withScripts(connections.dedicated());
      enforceDeadlines(this.writer, options.commandTimeoutMs);
      this.writer.on('error', () => {});
    }
    this.outage = new OutageLog(log, 'redis');
    this.client.on('error', (err: Error) => this.outage.failed(err));
    this.client.on('node error', (err: Error) => this.outage.failed(err));
    this.client.on('ready', () => this.outage.reconnected());

    this.channelName = `${options.keyPrefix}revoked`;
    this.revocationWaitMs = options.livenessCacheMs > 0 ? REVOCATION_WAIT_MS : 0;
    this.liveness = new LivenessCache(options.livenessCacheMs, REVOCATION_WAIT_MS);
    this.channel = new RevocationChannel(connections.listen, this.channelName, this.liveness, HEARTBEAT_MS, options.commandTimeoutMs, monotonic, (sid) => this.revocations.publish(sid));
  }

  /** Resolves when connected (the writer connection too), or after `timeoutMs` with false; never throws. */
  async waitUntilReady(timeoutMs: number): Promise<boolean> {
    const clients = this.writer === this.client ? [this.client] : [this.client, this.writer];
    const results = await Promise.all(clients.map((c) => readyWithin(c, timeoutMs)));
    return results.every(Boolean);
  }

  /** The index entry first: a session whose create has answered is always found by revokeUser. */
  createSession(sid: string, session: NewSession, ttlSeconds: number): Promise<void> {
    return this.guard(async () => {
      const index = userIndexKey(session.sub);
      const size = await this.writer.indexAdd(index, sid, Date.now(), ttlSeconds);
      await this.writer.createSession(sessionKey(sid), refreshDigest(session.refreshHash), ttlSeconds, session.sub, session.uv);
      await this.replicated(true);
      // Housekeeping: the session is made, so a failure here must not fail the create.
      if (size > INDEX_PRUNE_ABOVE) await this.prune(index).catch(() => {});
    });
  }

  rotateRefresh(sid: string, r: Rotation): Promise<RotateOutcome> {
    return this.guard(async () => {
      const [code, sub, uv] = await this.writer.rotateRefresh(
        sessionKey(sid), refreshDigest(r.presentedHash), refreshDigest(r.nextHash), r.ttlSeconds, r.graceMs, r.nowMs, this.channelName, sid,
      );
      // A session from before credential versions has none: it can match no user's version.
      if (code === 1 && typeof sub === 'string') {
        // The rotation has happened: nothing after it may fail the call, or the client, told 503, would
        // retry with the token just rotated away and be taken for a thief. So the WAIT (a rotation that
        // reached no replica still stands) and keeping the user's index alive are best effort.
        await Promise.all([
          this.replicated(false).catch(() => {}),
          this.client.indexTouch(userIndexKey(sub), r.ttlSeconds).catch(() => {}),
        ]);
        return { result: 'rotated', sub, uv: typeof uv === 'string' ? uv : '' };
      }
      if (code === 3) await this.revoked([sid], true);
      return { result: ROTATE_RESULTS[code as 0 | 2 | 3] ?? 'unknown' };
    });
  }

  /** From the liveness cache while the revocation channel is up and fresh; else one PTTL round trip. */
  async isLive(sid: string): Promise<boolean> {
    const now = monotonic();
    // The command connection must be up too: a cached answer is no answer while Redis is unreachable.
    if (this.client.status === 'ready' && this.liveness.isLive(sid, now)) return true;
    const epoch = this.liveness.epoch;
    const ttlMs = await this.guard(() => this.client.pttl(sessionKey(sid)));
    if (ttlMs === -2) return false;
    this.liveness.remember(sid, now, ttlMs < 0 ? Number.MAX_SAFE_INTEGER : ttlMs, epoch);
    return true;
  }

  revoke(sid: string): Promise<void> {
    this.liveness.invalidate(sid);
    return this.guard(async () => {
      const deleted = await this.writer.revokeSession(sessionKey(sid), this.channelName, sid);
      // Also when there was nothing to delete: another instance may be revoking it right now, and this
      // answer must not come before that revocation is in force everywhere.
      await this.revoked([sid], deleted === 1);
      // Again after: a liveness lookup answered while the script ran must not stay cached.
      this.liveness.invalidate(sid);
    });
  }

  revokeByRefresh(sid: string, refreshHash: string): Promise<boolean> {
    return this.guard(async () => {
      const code = await this.writer.revokeByRefresh(sessionKey(sid), refreshDigest(refreshHash), this.channelName, sid);
      // A session found gone may be in the middle of another instance's revocation: wait as for ours.
      // (A hash that does not match a live session revokes nothing and promises nothing.)
      if (code !== 0) await this.revoked([sid], code === 1);
      return code === 1;
    });
  }

  /** Index entries of sessions already gone are skipped and dropped. */
  async listSessions(user: string): Promise<SessionInfo[]> {
    return this.guard(async () => {
      const index = userIndexKey(user);
      const sids = await this.client.zrange(index, '0', '-1');
      const records = await Promise.all(sids.map((sid) => this.client.getBuffer(sessionKey(sid))));
      const live: SessionInfo[] = [];
      const dead: string[] = [];
      sids.forEach((sid, i) => {
        const r = readSessionRecord(records[i]!);
        if (r && r.sub === user) live.push({ sid, createdAtMs: r.createdAtMs, refreshedAtMs: r.refreshedAtMs });
        else dead.push(sid);
      });
      if (dead.length > 0) await this.client.zrem(index, ...dead);
      return live.sort((a, b) => a.createdAtMs - b.createdAtMs);
    });
  }

  /**
   * Every id in the index is revoked (each on its own slot) and then removed from the index; ids added
   * meanwhile (sessions created while this ran) stay for the next call.
   */
  async revokeUser(user: string): Promise<number> {
    return this.guard(async () => {
      const index = userIndexKey(user);
      const sids = await this.client.zrange(index, '0', '-1');
      for (const sid of sids) this.liveness.invalidate(sid);
      const deleted = await Promise.all(sids.map((sid) => this.writer.revokeSession(sessionKey(sid), this.channelName, sid)));
      const count = deleted.filter((d) => d === 1).length;
      if (sids.length > 0) await this.client.zrem(index, ...sids);
      if (sids.length > 0) await this.revoked(sids, count > 0);
      return count;
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

  /** Ready means able to serve: a master taking writes, or a cluster whose state is ok. */
  /** Each revoked session id, from this instance at once and from others through the channel. */
  onRevoked(listener: (sid: string) => void): () => void {
    return this.revocations.subscribe(listener);
  }

  ping(): Promise<void> {
    return this.guard(async () => {
      if (this.options.topology.mode === 'cluster') {
        const info = String(await this.client.call('CLUSTER', 'INFO'));
        if (!/^cluster_state:ok\s*$/m.test(info)) throw new Error(`CLUSTERDOWN cluster_state is not ok`);
        return;
      }
      // A replica (READONLY), a master refusing writes (NOREPLICAS, MISCONF) or none at all fails this.
      await this.client.set('ready', '1', 'PX', 10_000);
      if (this.writer !== this.client) await this.writer.set('ready', '1', 'PX', 10_000);
    });
  }

  async close(): Promise<void> {
    await this.channel.close();
    const clients = this.writer === this.client ? [this.client] : [this.client, this.writer];
    await Promise.all(clients.map(async (c) => {
      if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
      else c.disconnect();
    }));
  }

  /**
   * After a revocation was published: no instance may answer from its cache once this returns. Each
   * instance uses its cache only with a heartbeat confirmation younger than REVOCATION_WAIT_MS, and a
   * confirmation sent after the publish implies the message arrived; so waiting that long suffices.
   */
  private async revoked(sids: string[], wrote: boolean): Promise<void> {
    for (const sid of sids) {
      this.liveness.invalidate(sid);
      // Holders in this process hear it at once; other instances hear it on the channel.
      this.revocations.publish(sid);
    }
    // The wait runs in full even when the WAIT for replicas fails: a retry that finds the session gone
    // may then answer at once.
    const [replication] = await Promise.allSettled([
      wrote ? this.replicated(true) : Promise.resolve(),
      new Promise((r) => setTimeout(r, this.revocationWaitMs)),
    ]);
    if (replication.status === 'rejected') throw replication.reason;
  }

  /**
   * With store.waitForReplicas, a session write is answered only once that many replicas have it, so a
   * failover does not lose it (or bring a revoked session back). `required`: fewer acks fail the call.
   */
  private async replicated(required: boolean): Promise<void> {
    const wanted = this.options.waitForReplicas;
    if (wanted === 0) return;
    // Redis's own WAIT timeout well inside the command deadline, so a shortfall is an answer, not a timeout.
    const acked = Number(await this.writer.call('WAIT', wanted, Math.max(1, Math.floor(this.options.commandTimeoutMs * 0.8))));
    if (acked < wanted && required) throw new Error(`NOREPLICAS ${acked} of ${wanted} replicas acknowledged the write`);
  }

  /** Drops a few ids of sessions already gone, picked at random, from a user's index. */
  private async prune(index: string): Promise<void> {
    const sample = await this.client.zrandmember(index, INDEX_PRUNE_SAMPLE);
    const exists = await Promise.all(sample.map((sid) => this.client.exists(sessionKey(sid))));
    const dead = sample.filter((_, i) => exists[i] === 0);
    if (dead.length > 0) await this.client.zrem(index, ...dead);
  }

  private async guard<T>(op: () => Promise<T>): Promise<T> {
    try {
      // Each command has its own deadline (enforceDeadlines); this bounds an operation of a few.
      const result = await withDeadline(op(), 4 * this.options.commandTimeoutMs + this.revocationWaitMs);
      this.outage.answered();
      return result;
    } catch (err) {
      this.outage.commandFailed(err);
      throw new StoreUnavailableError(err);
    }
  }
}

function readyWithin(client: Redis | Cluster, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on('ready', onReady);
  });
}

function sessionKey(sid: string): string {
  return `s:{${sid}}`;
}

/** User names are anyone's input: keyed by digest, which is also the key's hash tag. */
function userIndexKey(user: string): string {
  return `u:{${createHash('sha256').update(user).digest('base64url').slice(0, 22)}}`;
}

function counterKey(key: string): string {
  return `c:{${key}}`;
}

function toCounter([count, resetSeconds]: [number, number]): Counter {
  return { count: Number(count), resetSeconds: Number(resetSeconds) };
}
