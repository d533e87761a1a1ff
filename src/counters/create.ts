import type { Clock } from '../clock.js';
import type { StoreConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { MemoryCounters } from './memory.js';
import { RedisCounters } from './redis.js';
import type { CounterStore } from './types.js';

/** The counters live where the sessions do (store.kind), on a connection of their own. */
export function createCounters(config: StoreConfig, clock: Clock, log: Logger): CounterStore {
  if (config.kind === 'redis') {
    const { kind: _kind, ...options } = config;
    return new RedisCounters(options, log);
  }
  return new MemoryCounters(clock);
}
