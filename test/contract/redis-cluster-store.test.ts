import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { RedisTokenStore } from '../../src/tokens/store/redis.js';
import { startCluster, type TestCluster } from '../support/redis-cluster.js';
import { tokenStoreContract } from './token-store.js';

let cluster: TestCluster;
let store: RedisTokenStore;

beforeAll(async () => {
  cluster = await startCluster(3);
  store = new RedisTokenStore({
    topology: { mode: 'cluster', nodes: cluster.urls.slice(0, 1) }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000,
    // The contract is about the store's answers; the cache (and the wait that keeps revocation
    // synchronous with it) is shown with several instances in test/integration/sync-revocation.test.ts.
    livenessCacheMs: 0, waitForReplicas: 0,
  }, silentLogger);
  expect(await store.waitUntilReady(10_000)).toBe(true);
}, 30_000);

afterAll(async () => {
  await store?.close();
  await cluster?.destroy();
});

tokenStoreContract('redis (3-master cluster)', {
  store: () => store,
  fastForward: (ms) => new Promise((r) => setTimeout(r, ms)),
  now: () => Date.now(),
});

describe('RedisTokenStore on a cluster', () => {
  it('spreads sessions, indexes and counters over every master', async () => {
    for (let i = 0; i < 30; i++) {
      await store.createSession(`spread${String(i).padStart(16, '0')}`, { sub: `user${i}`, refreshHash: 'h', uv: 'v' }, 60);
      await store.hit(`k${i}`, 60);
    }
    for (const n of cluster.nodes) {
      const raw = new Redis(n.url);
      try {
        expect(await raw.keys('gwtest:s:*')).not.toEqual([]);
        expect(await raw.keys('gwtest:u:*')).not.toEqual([]);
        expect(await raw.keys('gwtest:c:*')).not.toEqual([]);
      } finally {
        raw.disconnect();
      }
    }
  });

  it('listens for revocations on every master', async () => {
    await expect.poll(() => store.channel.connections.length, { timeout: 5000 }).toBe(3);
    await expect.poll(() => store.channel.up, { timeout: 5000 }).toBe(true);
    const ports = store.channel.connections.map((c) => c.options.port).sort();
    expect(ports).toEqual(cluster.nodes.map((n) => n.port).sort());
  });
});
