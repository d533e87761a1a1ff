import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, silentLogger } from '../../src/log.js';
import { StoreUnavailableError } from '../../src/tokens/store/types.js';
import { RedisTokenStore } from '../../src/tokens/store/redis.js';
import { SENTINEL_MASTER_NAME, startSentinel, type TestSentinel } from '../support/redis-sentinel.js';
import { tokenStoreContract } from './token-store.js';

let pair: TestSentinel;
let store: RedisTokenStore;

beforeAll(async () => {
  pair = await startSentinel();
  store = new RedisTokenStore({
    topology: { mode: 'sentinel', name: SENTINEL_MASTER_NAME, sentinels: pair.sentinels, tls: false },
    keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000,
    // The contract is about the store's answers; the cache (and the wait that keeps revocation
    // synchronous with it) is shown with several instances in test/integration/sync-revocation.test.ts.
    livenessCacheMs: 0, waitForReplicas: 1,
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

  it('is not ready on a replica (a url pointing at one): READONLY, logged once with its cause', async () => {
    const lines: Array<{ msg: string; cause?: string }> = [];
    const onReplica = new RedisTokenStore({
      topology: { mode: 'single', url: pair.replicas[0]!.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0,
    }, createLogger('info', (l) => lines.push(JSON.parse(l) as { msg: string; cause?: string })));
    try {
      expect(await onReplica.waitUntilReady(5000)).toBe(true);
      await expect(onReplica.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(onReplica.createSession('replicaxxxxxxxxxxxxxxx', { sub: 'alice', refreshHash: 'h', uv: 'v' }, 60)).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(lines.filter((l) => l.msg.startsWith('redis unavailable')).map((l) => l.cause)).toEqual(['READONLY']);
    } finally {
      await onReplica.close();
    }
  });
});
