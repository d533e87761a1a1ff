import { afterAll, beforeAll, expect } from 'vitest';
import { RedisCounters } from '../../src/stores/counters/redis-counters.js';
import { silentLogger } from '../../src/log.js';
import { RedisSessionStore } from '../../src/stores/sessions/redis-session-store.js';
import type { RedisStoreOptions } from '../../src/stores/redis/store-options.js';
import { counterStoreContract } from './counter-store.js';
import { sessionStoreContract } from './session-store.js';

/** What a topology's file gets back: the store and counters under the contract, once they are ready. */
export interface RedisUnderContract {
  store(): RedisSessionStore;
  counters(): RedisCounters;
}

export interface RedisTopology {
  /** Starts the servers and says how the gateway reaches them (keyPrefix, timeouts and the rest are the harness's). */
  start(): Promise<Pick<RedisStoreOptions, 'topology'> & Partial<RedisStoreOptions>>;
  /** Anything to do once both are ready (a Cluster connects every master up front). */
  ready?(store: RedisSessionStore, counters: RedisCounters): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The one harness that runs the session and counter store contracts on a Redis topology (single node,
 * Cluster, Sentinel): a store and counters made as the gateway makes them, both ready before the first
 * test, closed with the servers after the last. Each topology's file adds the tests only it can make.
 */
export function redisContracts(name: string, topology: RedisTopology): RedisUnderContract {
  let store: RedisSessionStore;
  let counters: RedisCounters;
  beforeAll(async () => {
    const options: RedisStoreOptions = {
      keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000,
      // The contract is about the store's answers; the liveness cache (and the wait that keeps revocation
      // synchronous with it) is shown with several instances in test/integration/sync-revocation.test.ts.
      livenessCacheMs: 0, waitForReplicas: 0, durability: 'available' as const,
      ...(await topology.start()),
    } as RedisStoreOptions;
    store = new RedisSessionStore(options, silentLogger);
    counters = new RedisCounters(options, silentLogger);
    expect(await store.waitUntilReady(10_000)).toBe(true);
    expect(await counters.waitUntilReady(10_000)).toBe(true);
    await topology.ready?.(store, counters);
  }, 30_000);
  afterAll(async () => {
    await store?.close();
    await counters?.close();
    await topology.stop();
  });
  const real = { fastForward: (ms: number) => new Promise<void>((r) => setTimeout(r, ms)), now: () => Date.now() };
  sessionStoreContract(name, { ...real, store: () => store });
  counterStoreContract(name, { ...real, store: () => counters });
  return { store: () => store, counters: () => counters };
}
