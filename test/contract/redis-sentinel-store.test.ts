import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { RedisTokenStore } from '../../src/tokens/store/redis.js';
import { SENTINEL_MASTER_NAME, startSentinel, type TestSentinel } from '../support/redis-sentinel.js';
import { tokenStoreContract } from './token-store.js';

let pair: TestSentinel;
let store: RedisTokenStore;

beforeAll(async () => {
  pair = await startSentinel();
  store = new RedisTokenStore({
    topology: { mode: 'sentinel', name: SENTINEL_MASTER_NAME, sentinels: pair.sentinels, tls: false },
    keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 1,
  }, silentLogger);
  expect(await store.waitUntilReady(10_000)).toBe(true);
}, 30_000);

afterAll(async () => {
  await store?.close();
  await pair?.destroy();
});

tokenStoreContract('redis (Sentinel: master and replica, WAIT 1)', {
  store: () => store,
  fastForward: (ms) => new Promise((r) => setTimeout(r, ms)),
  now: () => Date.now(),
});

describe('RedisTokenStore behind Sentinel', () => {
  it('talks to the master the sentinels name', async () => {
    const info = String(await store.client.info('server'));
    expect(Number(/tcp_port:(\d+)/.exec(info)![1])).toBe(await pair.masterPort());
    expect(await store.client.call('ROLE').then((r) => (r as string[])[0])).toBe('master');
  });
});
