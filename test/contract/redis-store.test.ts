import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { RedisCounters } from '../../src/counters/redis.js';
import { RedisSessionStore, type RedisStoreOptions } from '../../src/tokens/store/redis.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { measureSessionBytes } from './session-size.js';
import { counterStoreContract } from './counter-store.js';
import { sessionStoreContract } from './session-store.js';

let redis: TestRedis;
let store: RedisSessionStore;
let counters: RedisCounters;

beforeAll(async () => {
  redis = await startRedis();
  const options: RedisStoreOptions = {
    topology: { mode: 'single', url: redis.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0, durability: 'available' as const,
  };
  store = new RedisSessionStore(options, silentLogger);
  counters = new RedisCounters(options, silentLogger);
  expect(await store.waitUntilReady(5000)).toBe(true);
});

afterAll(async () => {
  await store?.close();
  await counters?.close();
  await redis?.destroy();
});

sessionStoreContract('redis (single node)', {
  store: () => store,
  fastForward: (ms) => new Promise((r) => setTimeout(r, ms)),
  now: () => Date.now(),
});
counterStoreContract('redis (single node)', {
  store: () => counters,
  fastForward: (ms) => new Promise((r) => setTimeout(r, ms)),
  now: () => Date.now(),
});

describe('RedisSessionStore revocation channel', () => {
  it('tells onRevoked listeners of revocations made by another instance, within a second', async () => {
    const other = new RedisSessionStore({ topology: { mode: 'single', url: redis.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0, durability: 'available' as const }, silentLogger);
    try {
      expect(await other.waitUntilReady(5000)).toBe(true);
      // The subscriber connects on its own schedule: wait until the channel is live on this instance.
      for (let i = 0; i < 100 && !store.liveness.enabled; i++) await new Promise((r) => setTimeout(r, 20));
      await store.createSession('revokedelsewhere00001', { sub: 'alice', uv: 'v1' }, 60);
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

describe('RedisSessionStore keys', () => {
  it('prefixes every key and hash-tags a session by its id, so one script touches one cluster slot', async () => {
    await store.createSession('abcdefghijklmnopqrstuv', { sub: 'alice', uv: 'v1' }, 60);
    await store.rotateRefresh('abcdefghijklmnopqrstuv', { generation: 0, ttlSeconds: 60, graceMs: 0, nowMs: Date.now() });
    const raw = new Redis(redis.url);
    try {
      expect(await raw.keys('*abcdefghijklmnopqrstuv*')).toEqual(['gwtest:s:{abcdefghijklmnopqrstuv}']);
      // No token and no digest of one: the subject, the credential version, times and the generation.
      const value = await raw.getBuffer('gwtest:s:{abcdefghijklmnopqrstuv}');
      expect(value!.length).toBe(1 + 6 + 6 + 4 + 2 + 'alice'.length + 2 + 'v1'.length);
      expect(await raw.ttl('gwtest:s:{abcdefghijklmnopqrstuv}')).toBeGreaterThan(50);
      // The user's index is keyed by a digest of the name, in two copies in slots of their own.
      expect((await raw.keys('gwtest:u:*')).every((k) => /^gwtest:u:\{[A-Za-z0-9_-]{22}(\.\d+)?\}$/.test(k))).toBe(true);
    } finally {
      await raw.quit();
    }
  });

  it('keeps the user index bounded: new sessions drop dead ids at random, listing drops the rest', async () => {
    const raw = new Redis(redis.url);
    try {
      const user = 'index-bounds';
      const sids = Array.from({ length: 12 }, (_, i) => `bounds${String(i).padStart(16, '0')}`);
      for (const sid of sids) await store.createSession(sid, { sub: user, uv: 'v' }, 60);
      // The index holding this user's ids (its key is a digest of the name).
      const card = async () => {
        for (const k of await raw.keys('gwtest:u:*')) if ((await raw.zscore(k, sids[11]!)) !== null) return raw.zcard(k);
        return 0;
      };
      expect(await card()).toBe(12);
      for (const sid of sids.slice(0, 10)) await store.revoke(sid);
      for (let i = 0; i < 5; i++) await store.createSession(`bounds-new${String(i).padStart(12, '0')}`, { sub: user, uv: 'v' }, 60);
      expect(await card()).toBeLessThan(17);
      expect((await store.listSessions(user)).length).toBe(7);
      expect(await card()).toBe(7);
    } finally {
      await raw.quit();
    }
  });

  it('keeps a session under 500 bytes at any age (INFO memory over 4,000 sessions, both index copies included)', async () => {
    const raw = new Redis(redis.url);
    try {
      const bytes = await measureSessionBytes(store, raw, 4000);
      console.log(`session bytes (INFO memory): ${JSON.stringify(bytes)}`);
      expect(bytes.fresh).toBeLessThanOrEqual(500);
      expect(bytes.afterOneRefresh).toBeLessThanOrEqual(500);
      expect(bytes.afterThreeRefreshes).toBeLessThanOrEqual(500);
    } finally {
      await raw.quit();
    }
  });
});
