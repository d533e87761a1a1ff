import type { Clock } from '../../clock.js';
import type { StoreConfig } from '../../config/types.js';
import type { Logger } from '../../log.js';
import { MemorySessionStore } from './memory.js';
import { RedisSessionStore } from './redis.js';
import type { SessionStore } from './types.js';

export function createStore(config: StoreConfig, clock: Clock, log: Logger): SessionStore {
  if (config.kind === 'redis') {
    const { kind: _kind, ...options } = config;
    return new RedisSessionStore(options, log);
  }
  log.warn('memory token store: tokens live in this process only; use store.kind redis (or REDIS_URL) for several instances or restarts');
  return new MemorySessionStore(clock);
}
