import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { enforceDeadlines, withDeadline } from '../redis/deadline.js';
import { OutageLog } from '../redis/outage-log.js';
import type { RedisStoreOptions } from '../redis/store-options.js';
import { closeClient, readyWithin } from '../redis/clients.js';
import { connect } from '../redis/topology.js';
import { StoreUnavailableError } from '../store-contracts.js';
import { CLEAR_GROUP, HIT_COUNTER, PEEK_COUNTER, TAKE_RATES } from './counter-scripts.js';
import { decisionOf } from './gcra.js';
import { RateLanes } from './rate-lanes.js';
import type { Counter, CounterKey, CounterStore, RateDecision } from './counter-store.js';

interface Scripts {
  hitCounter(key: string, marker: string, windowSeconds: number): Promise<[number, number]>;
  peekCounter(key: string, marker: string): Promise<[number, number]>;
  clearGroup(marker: string, windowSeconds: number): Promise<number>;
  takeRates(key: string, limit: number, windowMs: number, n: number): Promise<[number, string]>;
}

/**
 * The counters on the store's Redis (single node, Sentinel or Cluster), on a connection of their own:
 * a counter outage or a slow counter never holds up a session command. One warning per outage.
 */
export class RedisCounters implements CounterStore {
  readonly kind = 'redis';
  readonly client: (Redis | Cluster) & Scripts;
  private readonly outage: OutageLog;
  /** One GCRA command in flight per bucket; the takes that arrive meanwhile go together in the next. */
  private readonly lanes = new RateLanes((key, limit, windowSeconds, n) =>
    this.guard(() => this.client.takeRates(bucketKey(key), limit, windowSeconds * 1000, n).then((reply) => toDecisions(reply, limit, windowSeconds, n))));

  constructor(private readonly options: RedisStoreOptions, log: Logger) {
    const client = connect(options.topology, options).client;
    client.defineCommand('hitCounter', { numberOfKeys: 2, lua: HIT_COUNTER });
    client.defineCommand('peekCounter', { numberOfKeys: 2, lua: PEEK_COUNTER });
    client.defineCommand('clearGroup', { numberOfKeys: 1, lua: CLEAR_GROUP });
    client.defineCommand('takeRates', { numberOfKeys: 1, lua: TAKE_RATES });
    this.client = client as (Redis | Cluster) & Scripts;
    enforceDeadlines(this.client, options.commandTimeoutMs);
    this.outage = new OutageLog(log, 'redis (lockout and rate-limit counters)', 'lockout and rate limits let requests through until it returns');
    this.client.on('error', (err: Error) => this.outage.failed(err));
    this.client.on('node error', (err: Error) => this.outage.failed(err));
    this.client.on('ready', () => this.outage.connected());
  }

  /** Resolves when connected, or after `timeoutMs` with false; never throws. */
  waitUntilReady(timeoutMs: number): Promise<boolean> {
    return readyWithin(this.client, timeoutMs);
  }

  hit(key: CounterKey, windowSeconds: number): Promise<Counter> {
    return this.guard(async () => toCounter(await this.client.hitCounter(...redisKeys(key), windowSeconds)));
  }

  peek(key: CounterKey): Promise<Counter> {
    return this.guard(async () => toCounter(await this.client.peekCounter(...redisKeys(key))));
  }

  /**
   * One DEL per key (in a Cluster each counter may live on another slot), with the rate bucket of the same
   * name: the same hash tag, so the same slot.
   */
  reset(...keys: CounterKey[]): Promise<void> {
    return this.guard(async () => {
      await Promise.all(keys.map((key) => this.client.del(redisKeys(key)[0], ...(typeof key === 'string' ? [bucketKey(key)] : []))));
    });
  }

  resetGroup(group: string, windowSeconds: number): Promise<void> {
    return this.guard(async () => {
      await this.client.clearGroup(groupMarker(group), windowSeconds);
    });
  }

  take(key: string, limit: number, windowSeconds: number): Promise<RateDecision> {
    return this.lanes.take(key, limit, windowSeconds);
  }

  async close(): Promise<void> {
    await closeClient(this.client);
  }

  private guard<T>(op: () => Promise<T>): Promise<T> {
    let sent: Promise<T>;
    try {
      sent = op();
    } catch (err) {
      sent = Promise.reject(err);
    }
    return withDeadline(sent, 2 * this.options.commandTimeoutMs).then((result) => {
      this.outage.answered();
      return result;
    }, (err: unknown) => {
      this.outage.commandFailed(err);
      throw new StoreUnavailableError(err);
    });
  }
}

/** TAKE_RATES's reply, {allowed, ahead}, as a decision per take. */
function toDecisions([allowed, aheadText]: [number, string], limit: number, windowSeconds: number, n: number): RateDecision[] {
  const period = windowSeconds * 1000;
  const interval = period / limit;
  const ahead = Number(aheadText);
  const decisions: RateDecision[] = [];
  for (let i = 0; i < n; i++) decisions.push(decisionOf(i, allowed, ahead, interval, period));
  return decisions;
}

/** A GCRA bucket's Redis key. */
function bucketKey(key: string): string {
  return `r:{${key}}`;
}

/** The counter and its group's marker, under one hash tag (one Cluster slot). */
function redisKeys(key: CounterKey): [string, string] {
  if (typeof key === 'string') return [`c:{${key}}`, `c:{${key}}:cleared`];
  return [`c:{${key.group}}:${key.key}`, groupMarker(key.group)];
}

function groupMarker(group: string): string {
  return `c:{${group}}:cleared`;
}

function toCounter([count, resetSeconds]: [number, number]): Counter {
  return { count: Number(count), resetSeconds: Number(resetSeconds) };
}
