import type { Clock } from '../clock.js';
import type { StoreConfig } from '../config/types.js';
import { MemoryCounters } from '../counters/memory.js';
import { RedisCounters } from '../counters/redis.js';
import type { CounterStore } from '../counters/types.js';
import type { Logger } from '../log.js';
import { MemorySessionStore } from '../tokens/store/memory.js';
import { RedisSessionStore } from '../tokens/store/redis.js';
import type { SessionStore } from '../tokens/store/types.js';

/** What one store kind (store.kind) makes: the sessions, and the lockout and rate-limit counters beside them. */
interface StoreKind<C extends StoreConfig> {
  sessions(config: C, clock: Clock, log: Logger): SessionStore;
  /** The counters live where the sessions do, on a connection of their own. */
  counters(config: C, clock: Clock, log: Logger): CounterStore;
}

/** store.kind → its stores: the one place that knows every backend. */
const KINDS: { [K in StoreConfig['kind']]: StoreKind<Extract<StoreConfig, { kind: K }>> } = {
  memory: {
    sessions: (_config, clock, log) => {
      log.warn('memory token store: tokens live in this process only; use store.kind redis (or REDIS_URL) for several instances or restarts');
      return new MemorySessionStore(clock);
    },
    counters: (_config, clock) => new MemoryCounters(clock),
  },
  redis: {
    sessions: ({ kind: _kind, ...options }, _clock, log) => new RedisSessionStore(options, log),
    counters: ({ kind: _kind, ...options }, _clock, log) => new RedisCounters(options, log),
  },
};

export function createStore(config: StoreConfig, clock: Clock, log: Logger): SessionStore {
  return (KINDS[config.kind] as StoreKind<StoreConfig>).sessions(config, clock, log);
}

export function createCounters(config: StoreConfig, clock: Clock, log: Logger): CounterStore {
  return (KINDS[config.kind] as StoreKind<StoreConfig>).counters(config, clock, log);
}
