import { createHash, randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { enforceDeadlines, withDeadline } from '../redis/deadline.js';
import { LivenessCache } from '../redis/liveness-cache.js';
import { ACTIVATE5, CREATE5, DEVICE_NOTE, INDEX_ADD, LEGACY_REVOKE, LEGACY_ROTATE, LIST5, LIVE5, PENDING_TTL_SECONDS, REVOKE5, REVOKE_USER5, ROTATE5, TAG_ADD } from './session-scripts.js';
import { OutageLog } from '../redis/outage-log.js';
import { ReplicaWaits } from '../redis/replication.js';
import { RevocationChannel } from '../redis/revocation-channel.js';
import { Listeners } from '../listeners.js';
import { readSessionRecord, readSessionValue } from './session-record.js';
import { closeClient, readyWithin } from '../redis/clients.js';
import { HEARTBEAT_MS, REVOCATION_WAIT_MS, type RedisStoreOptions } from '../redis/store-options.js';
import { connect } from '../redis/topology.js';
import { legacySessionKey, sessionIdFor, sessionIdOnItsSlot, sessionPlace, userIndexKeys, userSessionKey, userTag } from './user-index.js';
import type { NewSession, RotateOutcome, Rotation, SessionDevice, SessionInfo, SessionStore } from './session-store.js';
import { StoreUnavailableError, type ReplicationStats } from '../store-contracts.js';

type Rotated = [number, string?, string?, number?, number?, number?];

/**
 * The keys of a session's scripts, their count first: its user's hash, and where the session has its
 * legacy record and index entry (on the same slot), when it may have them (see sessionKeys).
 */
type SessionKeys = [1, string] | [3, string, string, string];

interface Scripts {
  create5(...args: [...SessionKeys, field: string, ttl: number, sub: string, uv: string, pendingSeconds: number, sid: string]): Promise<number>;
  activate5(...args: [...SessionKeys, field: string, ttl: number]): Promise<number>;
  live5(...args: [...SessionKeys, field: string]): Promise<number>;
  rotate5(...args: [...SessionKeys, field: string, generation: number, ttl: number, graceMs: number, nowMs: number, channel: string, sid: string, renewLegacy: 0 | 1]): Promise<Rotated>;
  /** The user of the live session deleted, or null when there was none. */
  revoke5(...args: [...SessionKeys, field: string, channel: string, sid: string]): Promise<string | null>;
  /** [live sessions ended, ...ids published]. */
  revokeUser5(key: string, sub: string, channel: string, prefix: string): Promise<[number, ...string[]]>;
  list5Buffer(key: string, sub: string): Promise<Buffer[]>;
  /** Format 4 (sessions of 22-character ids, until they expire). */
  legacyRotate(s: string, generation: number, ttl: number, graceMs: number, nowMs: number, channel: string, sid: string): Promise<Rotated>;
  /** The user of the session deleted ('' when its format is another), or null when there was none. */
  legacyRevoke(s: string, channel: string, sid: string): Promise<string | null>;
  indexAdd(index: string, sid: string, createdAtMs: number, ttl: number): Promise<number>;
  tagAdd(key: string, sid: string, untilMs: number, nowMs: number, ttlMs: number): Promise<number>;
  deviceNote(key: string, sid: string, note: string, nowMs: number, ttlMs: number): Promise<number>;
}

type Scripted = (Redis | Cluster) & Scripts;

/** A format-4 session id (sessions made before the per-user hashes, read until they expire). */
const LEGACY_ID = /^[A-Za-z0-9_-]{22}$/;
const monotonic = () => performance.now();

/** The scripts and their number of keys (undefined: given first on each call, see SessionKeys). */
const SCRIPTS: Array<[string, number | undefined, string]> = [
  ['create5', undefined, CREATE5],
  ['activate5', undefined, ACTIVATE5],
  ['live5', undefined, LIVE5],
  ['rotate5', undefined, ROTATE5],
  ['revoke5', undefined, REVOKE5],
  ['revokeUser5', 1, REVOKE_USER5],
  ['list5', 1, LIST5],
  ['legacyRotate', 1, LEGACY_ROTATE],
  ['legacyRevoke', 1, LEGACY_REVOKE],
  ['indexAdd', 1, INDEX_ADD],
  ['tagAdd', 1, TAG_ADD],
  ['deviceNote', 1, DEVICE_NOTE],
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
  private readonly revocations = new Listeners<string>();
  /** store.writeLegacySessions: new sessions get a legacy record, and rotations renew it (see lua.ts). */
  private readonly legacyWrites: boolean;

  constructor(private readonly options: RedisStoreOptions, log: Logger) {
    this.legacyWrites = options.writeLegacySessions !== false;
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
   * A session in its user's hash (copy 0; in a Cluster, copy 1 on another master when copy 0's slot
   * fails, see user-index.ts), with its legacy record (store.writeLegacySessions, see lua.ts) in the same
   * step. With replicas to wait for, the session is written pending, made live once they have it, and
   * answered once they have that: a create answered with an error leaves no usable session (the failure
   * path deletes it, best effort; a pending one left behind is never read as a session and expires within
   * PENDING_TTL_SECONDS).
   */
  createSession(session: NewSession, ttlSeconds: number): Promise<string> {
    return this.guard(async () => {
      this.replicas?.admit();
      const copies: Array<0 | 1> = this.options.topology.mode === 'cluster' ? [0, 1] : [0];
      let failure: unknown;
      for (const copy of copies) {
        const sid = this.legacyWrites
          ? sessionIdOnItsSlot(session.sub, copy)
          : sessionIdFor(session.sub, copy, randomBytes(16).toString('base64url'));
        const place = sessionPlace(sid)!;
        const keys = sessionKeys(place);
        const pending = this.replicas ? Math.min(PENDING_TTL_SECONDS, ttlSeconds) : 0;
        try {
          await this.client.create5(...keys, place.field, ttlSeconds, session.sub, session.uv, pending, sid);
        } catch (err) {
          // A write that timed out may still run: delete it behind it (same connection, so in order),
          // best effort, so that the store agrees with the client's 503.
          this.forget(place, sid);
          failure = err;
          continue;
        }
        if (this.replicas) await this.activate(place, sid, ttlSeconds);
        return sid;
      }
      throw failure;
    });
  }

  /** A pending session, once its replicas have it, made live; and answered once they have that. */
  private async activate(place: Place, sid: string, ttlSeconds: number): Promise<void> {
    try {
      await this.replicas!.after();
    } catch (err) {
      this.forget(place, sid);
      throw err;
    }
    if ((await this.client.activate5(...sessionKeys(place), place.field, ttlSeconds)) !== 1) throw new Error('the pending session was gone (revoked or expired) before it was made live');
    try {
      await this.replicas!.after();
    } catch (err) {
      // Nobody holds its tokens: the client is told 503.
      this.forget(place, sid);
      throw err;
    }
  }

  /** Deletes a session nobody holds (a create that failed), with its legacy record; best effort, never published. */
  private forget(place: Place, sid: string): void {
    void this.client.hdel(place.key, place.field).catch(() => {});
    if (place.legacy) {
      void this.client.del(place.legacy.record).catch(() => {});
      void this.client.zrem(place.legacy.index, sid).catch(() => {});
    }
  }

  rotateRefresh(sid: string, r: Rotation): Promise<RotateOutcome> {
    return this.guard(async () => {
      this.replicas?.admit();
      const place = sessionPlace(sid);
      let answer: Rotated;
      if (place) answer = await this.client.rotate5(...sessionKeys(place), place.field, r.generation, r.ttlSeconds, r.graceMs, r.nowMs, this.channelName, sid, this.legacyWrites ? 1 : 0);
      else if (LEGACY_ID.test(sid)) answer = await this.client.legacyRotate(legacySessionKey(sid), r.generation, r.ttlSeconds, r.graceMs, r.nowMs, this.channelName, sid);
      else return { result: 'unknown' };
      const [code, sub, uv, generation, retry, createdAt] = answer;
      if (code === 1 && typeof sub === 'string') {
        if (!place) {
          // Format 4: both copies of the user's index live as long as the session now does (best effort).
          await Promise.allSettled(userIndexKeys(sub).map((index) => this.client.indexAdd(index, sid, Number(createdAt), r.ttlSeconds)));
        }
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

  /** True when the liveness cache knows the session live now (channel up and fresh); else undefined. */
  isLiveNow(sid: string): true | undefined {
    // The command connection must be up too: a cached answer is no answer while Redis is unreachable.
    return this.client.status === 'ready' && this.liveness.isLive(sid, monotonic()) ? true : undefined;
  }

  /** From the liveness cache while the revocation channel is up and fresh; else one round trip. */
  async isLive(sid: string): Promise<boolean> {
    const now = monotonic();
    // The command connection must be up too: a cached answer is no answer while Redis is unreachable.
    if (this.client.status === 'ready' && this.liveness.isLive(sid, now)) return true;
    const epoch = this.liveness.epoch;
    const place = sessionPlace(sid);
    let ttlMs: number;
    if (place) ttlMs = await this.guard(() => this.client.live5(...sessionKeys(place), place.field));
    else if (LEGACY_ID.test(sid)) ttlMs = await this.guard(() => this.client.pttl(legacySessionKey(sid)));
    else return false;
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
      const place = sessionPlace(sid);
      let user: string | null = null;
      if (place) user = await this.client.revoke5(...sessionKeys(place), place.field, this.channelName, sid);
      else if (LEGACY_ID.test(sid)) user = await this.client.legacyRevoke(legacySessionKey(sid), this.channelName, sid);
      await this.revoked([sid]);
      // Again after: a liveness lookup answered while the script ran must not stay cached.
      this.liveness.invalidate(sid);
      return user || undefined;
    });
  }

  /** The user's hashes (both copies in a Cluster), and format-4 sessions through the old index. */
  async listSessions(user: string): Promise<SessionInfo[]> {
    return this.guard(async () => {
      const tag = userTag(user);
      const copies = this.copies();
      const [legacy, ...hashes] = await Promise.allSettled([
        this.legacySessions(user),
        ...copies.map((copy) => this.client.list5Buffer(userSessionKey(tag, copy), user)),
      ]);
      const answered = hashes.filter((h) => h.status === 'fulfilled');
      if (answered.length === 0) throw (hashes[0] as PromiseRejectedResult).reason;
      const live: SessionInfo[] = legacy.status === 'fulfilled' ? legacy.value : [];
      const marked: SessionInfo[] = [];
      const nowS = Date.now() / 1000;
      hashes.forEach((h, i) => {
        if (h.status !== 'fulfilled') return;
        for (let j = 0; j + 1 < h.value.length; j += 2) {
          const r = readSessionValue(h.value[j + 1]!);
          if (!r) continue;
          const info = { sid: `${tag}${copies[i]}${h.value[j]!.toString()}`, createdAtMs: r.createdAtMs, refreshedAtMs: r.refreshedAtMs };
          // One with a legacy record not lapsed (give or take a minute of clocks): an earlier release
          // may have revoked it there. Asked as a token check asks (which deletes it when it was).
          if (r.legacyUntilS > nowS - 60) marked.push(info);
          else live.push(info);
        }
      });
      const checked = await Promise.all(marked.map((info) => {
        const place = sessionPlace(info.sid)!;
        return this.client.live5(...sessionKeys(place), place.field);
      }));
      live.push(...marked.filter((_, i) => checked[i] !== -2));
      return live.sort((a, b) => a.createdAtMs - b.createdAtMs);
    });
  }

  /**
   * Every session in the user's hashes (each copy in one step), and the format-4 ones through the old
   * index. A copy that cannot be reached now: the others are revoked, and the call fails (503), so that
   * the caller tries again.
   */
  async revokeUser(user: string): Promise<number> {
    return this.guard(async () => {
      this.replicas?.admit();
      const tag = userTag(user);
      const results = await Promise.allSettled(this.copies().map((copy) => this.client.revokeUser5(userSessionKey(tag, copy), user, this.channelName, `${tag}${copy}`)));
      const sids: string[] = [];
      let count = 0;
      for (const r of results) {
        if (r.status !== 'fulfilled') continue;
        count += Number(r.value[0]);
        sids.push(...(r.value.slice(1) as string[]));
      }
      let legacyFailure: unknown;
      try {
        count += await this.revokeLegacyUser(user);
      } catch (err) {
        legacyFailure = err;
      }
      if (sids.length > 0) await this.revoked(sids);
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      if (legacyFailure) throw legacyFailure;
      return count;
    });
  }

  /** Each tag is a sorted set `t:{<digest>}` of session ids scored by when their filing lapses. */
  tagSession(sid: string, tags: readonly string[], ttlSeconds: number): Promise<void> {
    return this.guard(async () => {
      const now = Date.now();
      await Promise.all(tags.map((tag) => this.client.tagAdd(tagKey(tag), sid, now + ttlSeconds * 1000, now, ttlSeconds * 1000)));
    });
  }

  /** The tag's sessions filed and not lapsed, each revoked as by revoke (the waits run side by side). */
  revokeTagged(tag: string): Promise<number> {
    return this.guard(async () => {
      const key = tagKey(tag);
      const sids = await this.client.zrangebyscore(key, Date.now(), '+inf');
      const users = await Promise.all(sids.map((sid) => this.revoke(sid)));
      if (sids.length > 0) await this.client.zrem(key, ...sids);
      return users.filter((u) => u !== undefined).length;
    });
  }

  /** A marker is a key `o:{<digest>}` set only when absent (SET NX), expiring after the TTL. */
  firstSighting(marker: string, ttlSeconds: number): Promise<boolean> {
    return this.guard(async () => (await this.client.set(markerKey(marker), '1', 'EX', Math.max(1, Math.ceil(ttlSeconds)), 'NX')) === 'OK');
  }

  /**
   * In the user's hash of notes, `sd:{<user tag>}` (the slot of copy 0 of their sessions), a field per
   * session: JSON `{a, u, e}` (address, user agent, when it lapses, ms). Earlier releases never read it.
   */
  noteSessionDevice(sid: string, user: string, device: SessionDevice, ttlSeconds: number): Promise<void> {
    return this.guard(async () => {
      const now = Date.now();
      const note = JSON.stringify({ a: device.address, u: device.userAgent, e: now + ttlSeconds * 1000 });
      await this.client.deviceNote(deviceKey(user), sid, note, now, ttlSeconds * 1000);
    });
  }

  /** The user's notes not lapsed (see noteSessionDevice); a field that does not read as one is skipped. */
  sessionDevices(user: string): Promise<Map<string, SessionDevice>> {
    return this.guard(async () => readDeviceNotes(await this.client.hgetall(deviceKey(user)), Date.now()));
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

  /** Copy 0 of a user's hash; in a Cluster copy 1 too (see user-index.ts). */
  private copies(): Array<0 | 1> {
    return this.options.topology.mode === 'cluster' ? [0, 1] : [0];
  }

  /** Both copies of a user's format-4 index, merged; fails only when neither answers. */
  private async legacyIndexed(user: string): Promise<{ sids: string[]; readable: string[] }> {
    const indexes = userIndexKeys(user);
    const copies = await Promise.allSettled(indexes.map((index) => this.client.zrange(index, '0', '-1')));
    const readable = indexes.filter((_, i) => copies[i]!.status === 'fulfilled');
    if (readable.length === 0) throw (copies[0] as PromiseRejectedResult).reason;
    const sids = new Set<string>();
    for (const c of copies) if (c.status === 'fulfilled') for (const sid of c.value) sids.add(sid);
    return { sids: [...sids], readable };
  }

  /**
   * A user's format-4 sessions still live; index entries of sessions gone are dropped. The index also
   * lists sessions of format 5 that have a legacy record (see lua.ts): those are listed from their hash,
   * and their entry is dropped here once the record is gone.
   */
  private async legacySessions(user: string): Promise<SessionInfo[]> {
    const { sids, readable } = await this.legacyIndexed(user);
    if (sids.length === 0) return [];
    const records = await Promise.all(sids.map((sid) => this.client.getBuffer(legacySessionKey(sid))));
    const live: SessionInfo[] = [];
    const dead: string[] = [];
    sids.forEach((sid, i) => {
      const r = readSessionRecord(records[i]!);
      if (!LEGACY_ID.test(sid)) {
        if (!r) dead.push(sid);
      } else if (r && r.sub === user) live.push({ sid, createdAtMs: r.createdAtMs, refreshedAtMs: r.refreshedAtMs });
      else dead.push(sid);
    });
    if (dead.length > 0) await Promise.allSettled(readable.map((index) => this.client.zrem(index, ...dead)));
    return live;
  }

  /**
   * Revokes a user's format-4 sessions (see legacySessions), and deletes the legacy records of the format-5
   * ones in the index (their sessions are revoked with the user's hashes, and counted there); fails when
   * one could not be revoked.
   */
  private async revokeLegacyUser(user: string): Promise<number> {
    const { sids, readable } = await this.legacyIndexed(user);
    if (sids.length === 0) return 0;
    for (const sid of sids) this.liveness.invalidate(sid);
    const results = await Promise.allSettled(sids.map((sid) => this.client.legacyRevoke(legacySessionKey(sid), this.channelName, sid)));
    const done = sids.filter((_, i) => results[i]!.status === 'fulfilled');
    if (done.length > 0) await Promise.allSettled(readable.map((index) => this.client.zrem(index, ...done)));
    // The format-5 ones were revoked (and are waited for) with the user's hashes.
    const sessions = done.filter((sid) => LEGACY_ID.test(sid));
    if (sessions.length > 0) await this.revoked(sessions);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return results.filter((r, i) => r.status === 'fulfilled' && r.value !== null && LEGACY_ID.test(sids[i]!)).length;
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

/** The sorted set of a session tag (its own slot in a Cluster). */
function tagKey(tag: string): string {
  return `t:{${createHash('sha256').update(tag).digest('base64url').slice(0, 22)}}`;
}

function markerKey(marker: string): string {
  return `o:{${createHash('sha256').update(marker).digest('base64url').slice(0, 22)}}`;
}

/** The hash of a user's device notes: the hash tag of their sessions (copy 0), so one slot in a Cluster. */
function deviceKey(user: string): string {
  return `sd:{${userTag(user)}}`;
}

/** The notes of a device hash (field: session id, value: JSON `{a, u, e}`) that still hold at `nowMs`. */
function readDeviceNotes(fields: Record<string, string>, nowMs: number): Map<string, SessionDevice> {
  const notes = new Map<string, SessionDevice>();
  for (const [sid, value] of Object.entries(fields)) {
    let note: unknown;
    try {
      note = JSON.parse(value);
    } catch {
      continue;
    }
    if (typeof note !== 'object' || note === null) continue;
    const { a, u, e } = note as Record<string, unknown>;
    if (typeof a === 'string' && typeof u === 'string' && typeof e === 'number' && e > nowMs) notes.set(sid, { address: a, userAgent: u });
  }
  return notes;
}

type Place = NonNullable<ReturnType<typeof sessionPlace>>;

/**
 * A format-5 session's keys (SessionKeys): its hash, then, when its id puts them on the hash's slot,
 * its legacy record and index entry (which the scripts read only when the session's value is marked as
 * having them: an id made without them lands there by chance once in 16,384).
 */
function sessionKeys(place: Place): SessionKeys {
  return place.legacy ? [3, place.key, place.legacy.record, place.legacy.index] : [1, place.key];
}
