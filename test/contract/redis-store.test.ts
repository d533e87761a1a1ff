import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { RedisTokenStore } from '../../src/tokens/store/redis.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { measureSessionBytes } from './session-size.js';
import { tokenStoreContract } from './token-store.js';

let redis: TestRedis;
let store: RedisTokenStore;

beforeAll(async () => {
  redis = await startRedis();
  store = new RedisTokenStore({
    topology: { mode: 'single', url: redis.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0,
  }, silentLogger);
  expect(await store.waitUntilReady(5000)).toBe(true);
});

afterAll(async () => {
  await store?.close();
  await redis?.destroy();
});

tokenStoreContract('redis (single node)', {
  store: () => store,
  fastForward: (ms) => new Promise((r) => setTimeout(r, ms)),
  now: () => Date.now(),
});

describe('RedisTokenStore revocation channel', () => {
  it('tells onRevoked listeners of revocations made by another instance, within a second', async () => {
    const other = new RedisTokenStore({ topology: { mode: 'single', url: redis.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0 }, silentLogger);
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
      expect(await raw.keys('*abcdefghijklmnopqrstuv*')).toEqual(['gwtest:s:{abcdefghijklmnopqrstuv}']);
      // Neither the refresh token nor its hash is stored, only a digest of the hash.
      const value = await raw.getBuffer('gwtest:s:{abcdefghijklmnopqrstuv}');
      expect(value!.includes('h2')).toBe(false);
      expect(await raw.ttl('gwtest:s:{abcdefghijklmnopqrstuv}')).toBeGreaterThan(50);
      // The user's index is keyed by a digest of the name, in a slot of its own.
      expect((await raw.keys('gwtest:u:*')).every((k) => /^gwtest:u:\{[A-Za-z0-9_-]{22}\}$/.test(k))).toBe(true);
    } finally {
      await raw.quit();
    }
  });

  it('keeps the user index bounded: new sessions drop dead ids at random, listing drops the rest', async () => {
    const raw = new Redis(redis.url);
    try {
      const user = 'index-bounds';
      const sids = Array.from({ length: 12 }, (_, i) => `bounds${String(i).padStart(16, '0')}`);
      for (const sid of sids) await store.createSession(sid, { sub: user, refreshHash: 'h', uv: 'v' }, 60);
      // The index holding this user's ids (its key is a digest of the name).
      const card = async () => {
        for (const k of await raw.keys('gwtest:u:*')) if ((await raw.zscore(k, sids[11]!)) !== null) return raw.zcard(k);
        return 0;
      };
      expect(await card()).toBe(12);
      for (const sid of sids.slice(0, 10)) await store.revoke(sid);
      for (let i = 0; i < 5; i++) await store.createSession(`bounds-new${String(i).padStart(12, '0')}`, { sub: user, refreshHash: 'h', uv: 'v' }, 60);
      expect(await card()).toBeLessThan(17);
      expect((await store.listSessions(user)).length).toBe(7);
      expect(await card()).toBe(7);
    } finally {
      await raw.quit();
    }
  });

  it('keeps a session under 0.6 KB at any age (MEMORY USAGE, index share included)', async () => {
    const raw = new Redis(redis.url);
    try {
      const bytes = await measureSessionBytes(store, raw, 'gwtest:');
      console.log(`session bytes (MEMORY USAGE): ${JSON.stringify(bytes)}`);
      expect(bytes.fresh).toBeLessThanOrEqual(600);
      expect(bytes.afterOneRefresh).toBeLessThanOrEqual(600);
      expect(bytes.after40Refreshes).toBeLessThanOrEqual(600);
    } finally {
      await raw.quit();
    }
  });
});
