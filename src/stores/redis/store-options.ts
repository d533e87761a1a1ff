import type { RedisStoreConfig } from '../../config/types.js';

/** A Redis store's settings (sessions, counters, shared tables); `writeLegacySessions` absent: true, its default. */
export type RedisStoreOptions = Omit<RedisStoreConfig, 'kind' | 'writeLegacySessions'> & { writeLegacySessions?: boolean };

/** How often each change listener (a store's revocation channel) proves it is alive. */
export const HEARTBEAT_MS = 100;
/**
 * A cache hit needs a heartbeat confirmation younger than this, and a revoking instance waits this long
 * before it answers (see LivenessCache): the price of synchronous revocation, paid by revocations only.
 */
export const REVOCATION_WAIT_MS = 3 * HEARTBEAT_MS;
