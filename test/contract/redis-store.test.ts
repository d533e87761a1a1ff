import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { RedisTokenStore } from '../../src/tokens/store/redis.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { tokenStoreContract } from './token-store.js';

let redis: TestRedis;
let store: RedisTokenStore;

beforeAll(async () => {
  redis = await startRedis();
  store = new RedisTokenStore({ url: redis.url, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000 }, silentLogger);
  expect(await store.waitUntilReady(5000)).toBe(true);
});

afterAll(async () => {
  await store?.close();
  await redis?.destroy();
});

tokenStoreContract('redis', {
  store: () => store,
  fastForward: (ms) => new Promise((r) => setTimeout(r, ms)),
  now: () => Date.now(),
});

describe('RedisTokenStore revocation channel', () => {
  it('tells onRevoked listeners of revocations made by another instance, within a second', async () => {
    const other = new RedisTokenStore({ url: redis.url, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000 }, silentLogger);
    try {
      expect(await other.waitUntilReady(5000)).toBe(true);
      // The subscriber connects on its own schedule: wait until the channel is live on this instance.
      for (let i = 0; i < 100 && !store.liveness.enabled; i++) await new Promise((r) => setTimeout(r, 20));
      await store.createSession('revokedelsewhere00001', { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      const heard = new Promise<string>((resolve) => {
        const off = store.onRevoked((sid) => {
          off();
          resolve(sid);
        });
      });
      const started = Date.now();
      await other.revoke('revokedelsewhere00001');
      expect(await heard).toBe('revokedelsewhere00001');
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      await other.close();
    }
  });
});

describe('RedisTokenStore keys', () => {
  it('prefixes every key and hash-tags a session by its id, so one script touches one cluster slot', async () => {
    await store.createSession('abcdefghijklmnopqrstuv', { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
    await store.rotateRefresh('abcdefghijklmnopqrstuv', { presentedHash: 'h1', nextHash: 'h2', ttlSeconds: 60, graceMs: 0, nowMs: Date.now() });
    const raw = new Redis(redis.url);
    try {
      const keys = (await raw.keys('*abcdefghijklmnopqrstuv*')).sort();
      expect(keys).toEqual(['gwtest:{abcdefghijklmnopqrstuv}:p', 'gwtest:{abcdefghijklmnopqrstuv}:s']);
      // The refresh token itself is never stored, only its hash.
      expect(await raw.hget('gwtest:{abcdefghijklmnopqrstuv}:s', 'rh')).toBe('h2');
      expect(await raw.ttl('gwtest:{abcdefghijklmnopqrstuv}:s')).toBeGreaterThan(50);
    } finally {
      await raw.quit();
    }
  });
});
