import type { Cluster, Redis } from 'ioredis';
import type { RedisStoreConfig } from '../../config/types.js';
import type { Logger } from '../../log.js';
import { enforceDeadlines, withDeadline } from './deadline.js';
import { LivenessCache } from './liveness-cache.js';
import { ACTIVATE, CREATE_SESSION, INDEX_ADD, PENDING_TTL_SECONDS, REVOKE, ROTATE_REFRESH } from './lua.js';
import { OutageLog } from './outage-log.js';
import { ReplicaWaits } from './replication.js';
import { RevocationChannel } from './revocation-channel.js';
import { RevocationFeed } from './revocations.js';
import { readSessionRecord } from './session-record.js';
import { closeClient } from './clients.js';
import { connect } from './topology.js';
import { userIndexKeys } from './user-index.js';
import {
  StoreUnavailableError, type NewSession, type ReplicationStats, type RotateOutcome, type Rotation, type SessionInfo, type SessionStore,
} from './types.js';

export type RedisStoreOptions = Omit<RedisStoreConfig, 'kind'>;

interface Scripts {
  createSession(s: string, ttl: number, sub: string, uv: string): Promise<number>;
  rotateRefresh(s: string, generation: number, ttl: number, graceMs: number, nowMs: number, channel: string, sid: string): Promise<[number, string?, string?, number?, number?, number?]>;
  /** The user of the session deleted ('' when its format is another), or null when there was none. */
  revokeSession(s: string, channel: string, sid: string): Promise<string | null>;
  indexAdd(index: string, sid: string, createdAtMs: number, ttl: number): Promise<number>;
  activate(pending: string, s: string, ttl: number): Promise<number>;
}

type Scripted = (Redis | Cluster) & Scripts;

/** How often each revocation listener proves it is alive. */
export const HEARTBEAT_MS = 100;
/**
 * A cache hit needs a heartbeat confirmation younger than this, and a revoking instance waits this long
 * before it answers (see LivenessCache): the price of synchronous revocation, paid by revocations only.
 */
export const REVOCATION_WAIT_MS = 3 * HEARTBEAT_MS;
/** Past this many ids in a copy of a user's index, each new session checks a few at random and drops dead ones. */
const INDEX_PRUNE_ABOVE = 8;
const INDEX_PRUNE_SAMPLE = 4;
const monotonic = () => performance.now();

const SCRIPTS: Array<[keyof Scripts, number, string]> = [
  ['createSession', 1, CREATE_SESSION],
  ['rotateRefresh', 1, ROTATE_REFRESH],
  ['revokeSession', 1, REVOKE],
  ['indexAdd', 1, INDEX_ADD],
  ['activate', 2, ACTIVATE],
];

function withScripts<T extends Redis | Cluster>(client: T): T & Scripts {
  for (const [name, numberOfKeys, lua] of SCRIPTS) client.defineCommand(name, { numberOfKeys, lua });
  return client as T & Scripts;
}

/**
 * Sessions on a single node, a Sentinel-managed master or a Redis Cluster: N gateway instances see the
 * same sessions. Every command has a hard deadline (commandTimeoutMs) and fails with
 * StoreUnavailableError; nothing is queued or replayed. Replica waits (store.waitForReplicas) run on a
 * connection of their own (ReplicaWaits), never in front of another caller's command.
 */
export class RedisSessionStore implements SessionStore {
  readonly kind = 'redis';
  readonly client: Scripted;
  readonly liveness: LivenessCache;
  readonly channel: RevocationChannel;
  private readonly waiter: Redis | undefined;
  private readonly replicas: ReplicaWaits | undefined;
  private readonly channelName: string;
  private readonly outage: OutageLog;
  private readonly revocationWaitMs: number;
  private readonly revocations = new RevocationFeed();

  constructor(private readonly options: RedisStoreOptions, log: Logger) {
    const connections = connect(options.topology, options);
    this.client = withScripts(connections.client);
    enforceDeadlines(this.client, options.commandTimeoutMs);
    if (options.waitForReplicas > 0) {
      this.waiter = connections.dedicated();
      enforceDeadlines(this.waiter, options.commandTimeoutMs);
      this.waiter.on('error', () => {});
      // Redis's own WAIT timeout well inside the command deadline, so a shortfall is an answer, not a timeout.
      const waitMs = Math.max(1, Math.floor(options.commandTimeoutMs * 0.8));
      this.replicas = new ReplicaWaits(this.waiter, options.waitForReplicas, options.durability, waitMs, log);
    }
    this.outage = new OutageLog(log, 'redis', 'session operations that need it answer 503 until it returns');
    this.client.on('error', (err: Error) => this.outage.failed(err));
    this.client.on('node error', (err: Error) => this.outage.failed(err));
    this.client.on('ready', () => this.outage.connected());

    this.channelName = `${options.keyPrefix}revoked`;
    this.revocationWaitMs = options.livenessCacheMs > 0 ? REVOCATION_WAIT_MS : 0;
    this.liveness = new LivenessCache(options.livenessCacheMs, REVOCATION_WAIT_MS);
    this.channel = new RevocationChannel(connections.listen, this.channelName, this.liveness, HEARTBEAT_MS, options.commandTimeoutMs, monotonic, (sid) => this.revocations.publish(sid));
  }

  /** Resolves when connected (the replica-wait connection too), or after `timeoutMs` with false; never throws. */
  async waitUntilReady(timeoutMs: number): Promise<boolean> {
    const results = await Promise.all(this.connections().map((c) => readyWithin(c, timeoutMs)));
    return results.every(Boolean);
  }

  /**
   * The session and both copies of the user's index at once; done when the session and at least one
   * copy are written (see user-index.ts). A create that fails deletes what it wrote: nobody holds its
   * tokens, and the client's retry makes another session. With replicas to wait for, the session is
   * written pending (see ACTIVATE in lua.ts) and made live once they have it, and the live record once
   * they have that: a create answered with an error leaves no usable session, only a pending key that
   * expires within a minute (or none: the failure path deletes it, best effort).
   */
  createSession(sid: string, session: NewSession, ttlSeconds: number): Promise<void> {
    return this.guard(async () => {
      this.replicas?.admit();
      const indexes = userIndexKeys(session.sub);
      const createdAt = Date.now();
      const first = this.replicas ? pendingKey(sid) : sessionKey(sid);
      const [made, ...copies] = await Promise.allSettled([
        this.client.createSession(first, this.replicas ? Math.min(PENDING_TTL_SECONDS, ttlSeconds) : ttlSeconds, session.sub, session.uv),
        ...indexes.map((index) => this.client.indexAdd(index, sid, createdAt, ttlSeconds)),
      ]);
      const indexed = copies.filter((c) => c.status === 'fulfilled');
      if (made.status === 'rejected' || indexed.length === 0) {
        if (made.status === 'fulfilled') await this.client.del(first).catch(() => {});
        throw made.status === 'rejected' ? made.reason : (copies[0] as PromiseRejectedResult).reason;
      }
      if (this.replicas) await this.activate(sid, ttlSeconds);
      // Housekeeping: the session is made, so a failure here must not fail the create.
      copies.forEach((c, i) => {
        if (c.status === 'fulfilled' && c.value > INDEX_PRUNE_ABOVE) void this.prune(indexes[i]!).catch(() => {});
      });
    });
  }

  /** A pending session, once its replicas have it, made live; and the live record, once they have that. */
  private async activate(sid: string, ttlSeconds: number): Promise<void> {
    try {
      await this.replicas!.after();
    } catch (err) {
      await this.client.del(pendingKey(sid)).catch(() => {});
      throw err;
    }
    if ((await this.client.activate(pendingKey(sid), sessionKey(sid), ttlSeconds)) !== 1) throw new Error('the pending session was gone (revoked or expired) before it was made live');
    try {
      await this.replicas!.after();
    } catch (err) {
      // Nobody holds its tokens: the client was told 503.
      await this.client.del(sessionKey(sid)).catch(() => {});
      throw err;
    }
  }

  rotateRefresh(sid: string, r: Rotation): Promise<RotateOutcome> {
    return this.guard(async () => {
      this.replicas?.admit();
      const [code, sub, uv, generation, retry, createdAt] = await this.client.rotateRefresh(
        sessionKey(sid), r.generation, r.ttlSeconds, r.graceMs, r.nowMs, this.channelName, sid,
      );
      if (code === 1 && typeof sub === 'string') {
        // Both copies of the user's index live as long as the session now does, and get the session
        // back if they missed its create (an outage of their slot): best effort, the rotation stands.
        await Promise.allSettled(userIndexKeys(sub).map((index) => this.client.indexAdd(index, sid, Number(createdAt), r.ttlSeconds)));
        // A failure here answers 503 (strict only); the client's retry gets the same successor.
        await this.replicas?.after();
        return { result: 'rotated', sub, uv: typeof uv === 'string' ? uv : '', generation: Number(generation), retry: retry === 1 };
      }
      if (code === 3) {
        await this.revoked([sid]);
        return { result: 'reused' };
      }
      return { result: 'unknown' };
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

  /**
   * The same steps whether or not the session exists (its answer tells nothing): delete, then the wait
   * for revocation in force everywhere (another instance may be revoking it right now) and for replicas.
   */
  revoke(sid: string): Promise<string | undefined> {
    this.liveness.invalidate(sid);
    return this.guard(async () => {
      this.replicas?.admit();
      const user = await this.client.revokeSession(sessionKey(sid), this.channelName, sid);
      await this.revoked([sid]);
      // Again after: a liveness lookup answered while the script ran must not stay cached.
      this.liveness.invalidate(sid);
      return user || undefined;
    });
  }

  /** Index entries of sessions already gone are skipped and dropped. */
  async listSessions(user: string): Promise<SessionInfo[]> {
    return this.guard(async () => {
      const { sids, readable } = await this.indexed(user);
      const records = await Promise.all(sids.map((sid) => this.client.getBuffer(sessionKey(sid))));
      const live: SessionInfo[] = [];
      const dead: string[] = [];
      sids.forEach((sid, i) => {
        const r = readSessionRecord(records[i]!);
        if (r && r.sub === user) live.push({ sid, createdAtMs: r.createdAtMs, refreshedAtMs: r.refreshedAtMs });
        else dead.push(sid);
      });
      // A session still pending (being created) keeps its index entry.
      const pending = await Promise.all(dead.map((sid) => this.client.exists(pendingKey(sid))));
      const gone = dead.filter((_, i) => pending[i] === 0);
      if (gone.length > 0) await Promise.allSettled(readable.map((index) => this.client.zrem(index, ...gone)));
      return live.sort((a, b) => a.createdAtMs - b.createdAtMs);
    });
  }

  /**
   * Every id in either copy of the index is revoked (each on its own slot) and then removed from the
   * copies; ids added meanwhile (sessions created while this ran) stay for the next call. One copy
   * unreachable is enough: a session is in every copy that was up when it was made (see user-index.ts).
   * A session whose own slot is unreachable cannot be revoked now: the others are, and the call fails
   * (503), so the caller tries again; its id stays in the index for that.
   */
  async revokeUser(user: string): Promise<number> {
    return this.guard(async () => {
      this.replicas?.admit();
      const { sids, readable } = await this.indexed(user);
      for (const sid of sids) this.liveness.invalidate(sid);
      const results = await Promise.allSettled(sids.map((sid) => this.client.revokeSession(sessionKey(sid), this.channelName, sid)));
      const done = sids.filter((_, i) => results[i]!.status === 'fulfilled');
      if (done.length > 0) await Promise.allSettled(readable.map((index) => this.client.zrem(index, ...done)));
      if (done.length > 0) await this.revoked(done);
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      return results.filter((r) => r.status === 'fulfilled' && r.value !== null).length;
    });
  }

  /** Each revoked session id, from this instance at once and from others through the channel. */
  onRevoked(listener: (sid: string) => void): () => void {
    return this.revocations.subscribe(listener);
  }

  replication(): ReplicationStats | undefined {
    return this.replicas?.stats();
  }

  /**
   * Readiness, on the command connection (never behind a replica wait): a master taking writes; in a
   * Cluster, any master answering with cluster_state ok (a partial outage is every instance's alike, see
   * SessionStore.ping).
   */
  ping(): Promise<void> {
    return this.guard(async () => {
      if (this.options.topology.mode === 'cluster') {
        const cluster = this.client as Cluster;
        if (cluster.status !== 'ready') throw new Error(`cluster connection ${cluster.status}`);
        // Any master that answers and still serves its slots: a dead master leaves the others ok with
        // cluster-require-full-coverage no (a partial outage); with yes they all refuse, and so does this.
        await Promise.any(cluster.nodes('master').map(async (node) => {
          if (!/^cluster_state:ok\s*$/m.test(String(await node.call('CLUSTER', 'INFO')))) throw new Error('CLUSTERDOWN cluster_state is not ok');
        }));
        return;
      }
      // A replica (READONLY), a master refusing writes (MISCONF) or none at all fails this.
      await this.client.set('ready', '1', 'PX', 10_000);
    });
  }

  async close(): Promise<void> {
    this.replicas?.close();
    await this.channel.close();
    await Promise.all(this.connections().map(closeClient));
  }

  private connections(): Array<Redis | Cluster> {
    return this.waiter ? [this.client, this.waiter] : [this.client];
  }

  /** Both copies of the user's index, merged; fails only when neither answers. */
  private async indexed(user: string): Promise<{ sids: string[]; readable: string[] }> {
    const indexes = userIndexKeys(user);
    const copies = await Promise.allSettled(indexes.map((index) => this.client.zrange(index, '0', '-1')));
    const readable = indexes.filter((_, i) => copies[i]!.status === 'fulfilled');
    if (readable.length === 0) throw (copies[0] as PromiseRejectedResult).reason;
    const sids = new Set<string>();
    for (const c of copies) if (c.status === 'fulfilled') for (const sid of c.value) sids.add(sid);
    return { sids: [...sids], readable };
  }

  /**
   * After a revocation was published: no instance may answer from its cache once this returns. Each
   * instance uses its cache only with a heartbeat confirmation younger than REVOCATION_WAIT_MS, and a
   * confirmation sent after the publish implies the message arrived; so waiting that long suffices.
   * The wait runs in full even when the replica wait fails: a retry may then answer at once.
   */
  private async revoked(sids: string[]): Promise<void> {
    for (const sid of sids) {
      this.liveness.invalidate(sid);
      // Holders in this process hear it at once; other instances hear it on the channel.
      this.revocations.publish(sid);
    }
    const [replication] = await Promise.allSettled([
      this.replicas?.after(),
      new Promise((r) => setTimeout(r, this.revocationWaitMs)),
    ]);
    if (replication.status === 'rejected') throw replication.reason;
  }

  /** Drops a few ids of sessions already gone, picked at random, from a copy of a user's index. */
  private async prune(index: string): Promise<void> {
    const sample = await this.client.zrandmember(index, INDEX_PRUNE_SAMPLE);
    const exists = await Promise.all(sample.map((sid) => this.client.exists(sessionKey(sid), pendingKey(sid))));
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

/** Resolves true once the client is ready, false after `timeoutMs`; never throws. */
export function readyWithin(client: Redis | Cluster, timeoutMs: number): Promise<boolean> {
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

/** A session being created, until its replicas have it (see ACTIVATE in lua.ts). */
function pendingKey(sid: string): string {
  return `p:{${sid}}`;
}
