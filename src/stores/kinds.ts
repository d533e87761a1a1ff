import type { Clock } from '../clock.js';
import type { StoreConfig } from '../config/types.js';
import { MemoryCounters } from './counters/memory-counters.js';
import { RedisCounters } from './counters/redis-counters.js';
import type { CounterStore } from './counters/counter-store.js';
import type { Logger } from '../log.js';
import { MemorySessionStore } from './sessions/memory-session-store.js';
import { RedisSessionStore } from './sessions/redis-session-store.js';
import type { SessionStore } from './sessions/session-store.js';
import { MemoryTable, type SharedTable } from './tables/shared-table.js';
import { RedisTable } from './tables/shared-table-redis.js';

/** What one store kind (store.kind) makes: the sessions, and the lockout and rate-limit counters beside them. */
interface StoreKind<C extends StoreConfig> {
  sessions(config: C, clock: Clock, log: Logger): SessionStore;
  /** The counters live where the sessions do, on a connection of their own. */
  counters(config: C, clock: Clock, log: Logger): CounterStore;
  /** A shared table (API keys, users kept in the store) beside them, on connections of its own. */
  table(name: string, config: C, log: Logger): SharedTable<unknown>;
}

/** store.kind → its stores: the one place that knows every backend. */
const KINDS: { [K in StoreConfig['kind']]: StoreKind<Extract<StoreConfig, { kind: K }>> } = {
  memory: {
    sessions: (_config, clock, log) => {
      log.warn('memory token store: tokens live in this process only; use store.kind redis (or REDIS_URL) for several instances or restarts');
      return new MemorySessionStore(clock);
    },
    counters: (_config, clock) => new MemoryCounters(clock),
    table: () => new MemoryTable<unknown>(),
  },
  redis: {
    sessions: ({ kind: _kind, ...options }, _clock, log) => new RedisSessionStore(options, log),
    counters: ({ kind: _kind, ...options }, _clock, log) => new RedisCounters(options, log),
    table: (name, { kind: _kind, ...options }, log) => new RedisTable<unknown>(name, options, log),
  },
};

export function createStore(config: StoreConfig, clock: Clock, log: Logger): SessionStore {
  return (KINDS[config.kind] as StoreKind<StoreConfig>).sessions(config, clock, log);
}

export function createCounters(config: StoreConfig, clock: Clock, log: Logger): CounterStore {
  return (KINDS[config.kind] as StoreKind<StoreConfig>).counters(config, clock, log);
}

export function createTable<T>(name: string, config: StoreConfig, log: Logger): SharedTable<T> {
  return (KINDS[config.kind] as StoreKind<StoreConfig>).table(name, config, log) as SharedTable<T>;
}
