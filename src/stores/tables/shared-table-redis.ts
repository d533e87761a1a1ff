import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { closeClient, readyWithin } from '../redis/clients.js';
import { enforceDeadlines, withDeadline } from '../redis/deadline.js';
import { LivenessCache } from '../redis/liveness-cache.js';
import { OutageLog } from '../redis/outage-log.js';
import { HEARTBEAT_MS, REVOCATION_WAIT_MS, type RedisStoreOptions } from '../redis/store-options.js';
import { RevocationChannel } from '../redis/revocation-channel.js';
import { Listeners } from '../listeners.js';
import { connect } from '../redis/topology.js';
import { StoreUnavailableError } from '../store-contracts.js';
import { deepFreeze, type SharedTable } from './shared-table.js';

/** How long an entry read from Redis is answered from memory (the change channel keeps it true meanwhile). */
const TABLE_CACHE_MS = 60_000;

// KEYS[1] = the entries' hash, KEYS[2] = the notes' hash (one hash tag: one Cluster slot). ARGV[1] = id.
const CREATE = `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1`;
const UPDATE = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1`;
// The same steps whether or not the entry exists.
const REMOVE = `
local old = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[1])
return old`;
// A note only for an entry that still exists (a late note must not outlive a removal).
const NOTE = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1`;

interface Scripts {
  tableCreate(entries: string, notes: string, id: string, json: string, channel: string): Promise<number>;
  tableUpdate(entries: string, notes: string, id: string, json: string, channel: string): Promise<number>;
  tableRemove(entries: string, notes: string, id: string, channel: string): Promise<string | null>;
  tableNote(entries: string, notes: string, id: string, text: string): Promise<number>;
}

const monotonic = () => performance.now();

/**
 * A shared table in the store's Redis (single node, Sentinel or Cluster), on connections of its own:
 * `t:{<name>}` holds the entries, `t:{<name>}:notes` the notes (under store.keyPrefix), and
 * `<keyPrefix>t:<name>:changed` carries the id of each entry changed or removed. An entry read once is
 * answered from memory (getNow) while the channel is up and its heartbeat fresh; a change is answered
 * once every instance whose heartbeat is that fresh has dropped the old value (REVOCATION_WAIT_MS after
 * it was published), exactly as a session revocation.
 */
export class RedisTable<T> implements SharedTable<T> {
  readonly kind = 'redis';
  readonly client: (Redis | Cluster) & Scripts;
  readonly cache: LivenessCache;
  readonly channel: RevocationChannel;
  private readonly values = new Map<string, T>();
  private readonly entriesKey: string;
  private readonly notesKey: string;
  private readonly channelName: string;
  private readonly changeWaitMs: number;
  private readonly outage: OutageLog;
  private readonly feed = new Listeners<string>();
  /** The connection was ready once: before, a command waits for it (a start's first requests), after, it fails fast. */
  private connectedOnce = false;

  constructor(name: string, private readonly options: RedisStoreOptions, log: Logger, cacheMs = options.livenessCacheMs > 0 ? TABLE_CACHE_MS : 0) {
    const connections = connect(options.topology, options);
    const client = connections.client;
    client.defineCommand('tableCreate', { numberOfKeys: 2, lua: CREATE });
    client.defineCommand('tableUpdate', { numberOfKeys: 2, lua: UPDATE });
    client.defineCommand('tableRemove', { numberOfKeys: 2, lua: REMOVE });
    client.defineCommand('tableNote', { numberOfKeys: 2, lua: NOTE });
    this.client = client as (Redis | Cluster) & Scripts;
    enforceDeadlines(this.client, options.commandTimeoutMs);
    this.outage = new OutageLog(log, `redis (${name})`, `${name} not read in the last minute are refused with 503 until it returns`);
    this.client.on('error', (err: Error) => this.outage.failed(err));
    this.client.on('node error', (err: Error) => this.outage.failed(err));
    this.client.on('ready', () => {
      this.connectedOnce = true;
      this.outage.connected();
    });
    this.entriesKey = `t:{${name}}`;
    this.notesKey = `t:{${name}}:notes`;
    this.channelName = `${options.keyPrefix}t:${name}:changed`;
    this.changeWaitMs = cacheMs > 0 ? REVOCATION_WAIT_MS : 0;
    this.cache = new LivenessCache(cacheMs, REVOCATION_WAIT_MS);
    this.channel = new RevocationChannel(connections.listen, this.channelName, this.cache, HEARTBEAT_MS, options.commandTimeoutMs, monotonic, (id) => {
      this.values.delete(id);
      this.feed.publish(id);
    });
  }

  getNow(id: string): T | undefined {
    if (this.client.status !== 'ready' || !this.cache.isLive(id, monotonic())) return undefined;
    return this.values.get(id);
  }

  async get(id: string): Promise<T | null> {
    const now = monotonic();
    const epoch = this.cache.epoch;
    const json = await this.guard(() => this.client.hget(this.entriesKey, id));
    if (json === null) return null;
    const value = deepFreeze(JSON.parse(json) as T);
    // Remembered only when no change was heard while the read was in flight.
    if (this.cache.enabled && epoch === this.cache.epoch) {
      this.values.set(id, value);
      this.cache.remember(id, now, Number.MAX_SAFE_INTEGER, epoch);
    }
    return value;
  }

  create(id: string, value: T): Promise<boolean> {
    return this.guard(async () => (await this.client.tableCreate(this.entriesKey, this.notesKey, id, JSON.stringify(value), this.channelName)) === 1);
  }

  update(id: string, value: T): Promise<boolean> {
    this.forget(id);
    return this.guard(async () => {
      const done = (await this.client.tableUpdate(this.entriesKey, this.notesKey, id, JSON.stringify(value), this.channelName)) === 1;
      await this.changed(id);
      return done;
    });
  }

  remove(id: string): Promise<T | null> {
    this.forget(id);
    return this.guard(async () => {
      const old = await this.client.tableRemove(this.entriesKey, this.notesKey, id, this.channelName);
      await this.changed(id);
      return old === null ? null : (JSON.parse(old) as T);
    });
  }

  all(): Promise<Array<{ id: string; value: T; note: string | undefined }>> {
    return this.guard(async () => {
      const [entries, notes] = await Promise.all([this.client.hgetall(this.entriesKey), this.client.hgetall(this.notesKey)]);
      return Object.entries(entries).map(([id, json]) => ({ id, value: JSON.parse(json) as T, note: notes[id] }));
    });
  }

  note(id: string, text: string): void {
    if (this.client.status !== 'ready') return;
    this.client.tableNote(this.entriesKey, this.notesKey, id, text).catch(() => {});
  }

  onChanged(listener: (id: string) => void): () => void {
    return this.feed.subscribe(listener);
  }

  waitUntilReady(timeoutMs: number): Promise<boolean> {
    return readyWithin(this.client, timeoutMs);
  }

  async close(): Promise<void> {
    await this.channel.close();
    await closeClient(this.client);
  }

  private forget(id: string): void {
    this.cache.invalidate(id);
    this.values.delete(id);
  }

  /**
   * After a change was published: every instance that may answer from its cache has dropped the old
   * value once this returns (see RedisSessionStore.revoked); this process's listeners hear it at once.
   */
  private async changed(id: string): Promise<void> {
    this.forget(id);
    this.feed.publish(id);
    if (this.changeWaitMs > 0) await new Promise((r) => setTimeout(r, this.changeWaitMs));
    // Again after: a read answered while the change ran must not stay cached.
    this.forget(id);
  }

  private async guard<T2>(op: () => Promise<T2>): Promise<T2> {
    // Commands are not queued while connecting: a request that comes before the first connection (the
    // listener opens while the table still connects) waits for it rather than be refused.
    if (!this.connectedOnce) await readyWithin(this.client, this.options.commandTimeoutMs);
    try {
      const result = await withDeadline(op(), 3 * this.options.commandTimeoutMs + this.changeWaitMs);
      this.outage.answered();
      return result;
    } catch (err) {
      this.outage.commandFailed(err);
      throw new StoreUnavailableError(err);
    }
  }
}
