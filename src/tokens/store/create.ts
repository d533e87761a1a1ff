import type { Clock } from '../../clock.js';
import type { StoreConfig } from '../../config/types.js';
import type { Logger } from '../../log.js';
import { MemoryTokenStore } from './memory.js';
import { RedisTokenStore } from './redis.js';
import type { TokenStore } from './types.js';

export function createStore(config: StoreConfig, clock: Clock, log: Logger): TokenStore {
  if (config.kind === 'redis') {
    const { kind: _kind, ...options } = config;
    return new RedisTokenStore(options, log);
  }
  log.warn('memory token store: tokens live in this process only; use store.kind redis (or REDIS_URL) for several instances or restarts');
  return new MemoryTokenStore(clock);
}
