import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { RedisCounters } from '../../src/stores/counters/redis-counters.js';
import { RedisSessionStore, type RedisStoreOptions } from '../../src/stores/sessions/redis-session-store.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { userIndexKeys, userTag } from '../../src/stores/sessions/user-index.js';
import { measureSessionBytes } from './session-size.js';
import { redisContracts } from './redis-harness.js';

let redis: TestRedis;
let store: RedisSessionStore;
let counters: RedisCounters;

redisContracts('redis (single node)', {
  async start() {
    redis = await startRedis();
    return { topology: { mode: 'single', url: redis.url }, livenessCacheMs: 2000 };
  },
  async ready(s, c) {
    store = s;
    counters = c;
  },
  stop: () => redis?.destroy(),
});

describe('RedisSessionStore revocation channel', () => {
  it('tells onRevoked listeners of revocations made by another instance, within a second', async () => {
    const other = new RedisSessionStore({ topology: { mode: 'single', url: redis.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0, durability: 'available' as const }, silentLogger);
    try {
      expect(await other.waitUntilReady(5000)).toBe(true);
      // The subscriber connects on its own schedule: wait until the channel is live on this instance.
      for (let i = 0; i < 100 && !store.liveness.enabled; i++) await new Promise((r) => setTimeout(r, 20));
      const sid = await store.createSession({ sub: 'alice', uv: 'v1' }, 60);
      const heard = new Promise<string>((resolve) => {
        const off = store.onRevoked((sid) => {
          off();
          resolve(sid);
        });
      });
      const started = Date.now();
      await other.revoke(sid);
      expect(await heard).toBe(sid);
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      await other.close();
    }
  });
});

describe('RedisSessionStore keys', () => {
  it('keeps a user\'s sessions in one hash of theirs (one cluster slot), one field each, no token', async () => {
    const sid = await store.createSession({ sub: 'alice-keys', uv: 'v1' }, 60);
    await store.rotateRefresh(sid, { generation: 0, ttlSeconds: 60, graceMs: 0, nowMs: Date.now() });
    const raw = new Redis(redis.url);
    try {
      const tag = userTag('alice-keys');
      expect(sid.slice(0, 23)).toBe(`${tag}0`);
      expect(await raw.keys(`*${tag}*`)).toEqual([`gwtest:ss:{${tag}}`]);
      // The user once, then per session: state, times, generation, expiry and the credential version.
      expect(await raw.hget(`gwtest:ss:{${tag}}`, 'u')).toBe('alice-keys');
      const value = await raw.hgetBuffer(`gwtest:ss:{${tag}}`, sid.slice(23));
      expect(value!.length).toBe(1 + 6 + 6 + 4 + 4 + 2 + 'v1'.length);
      expect(await raw.ttl(`gwtest:ss:{${tag}}`)).toBeGreaterThan(50);
      expect(await raw.object('ENCODING', `gwtest:ss:{${tag}}`)).toBe('listpack');
    } finally {
      await raw.quit();
    }
  });

  it('drops expired sessions from a user\'s hash: creates sample a few, listing drops the rest', async () => {
    const raw = new Redis(redis.url);
    try {
      const user = 'hash-bounds';
      const key = `gwtest:ss:{${userTag(user)}}`;
      // Three seconds to live: on a busy machine the twelve creates may take more than one (a create
      // samples away the expired ones it meets), so the count is only asserted when none can have expired.
      const started = Date.now();
      for (let i = 0; i < 12; i++) await store.createSession({ sub: user, uv: 'v' }, 3);
      const created = Date.now();
      if (created - started < 2500) expect(await raw.hlen(key)).toBe(13);
      await new Promise((r) => setTimeout(r, Math.max(0, created + 3200 - Date.now())));
      for (let i = 0; i < 5; i++) await store.createSession({ sub: user, uv: 'v' }, 60);
      expect(await raw.hlen(key)).toBeLessThan(18);
      expect((await store.listSessions(user)).length).toBe(5);
      expect(await raw.hlen(key)).toBe(6);
    } finally {
      await raw.quit();
    }
  });

  it('still reads, rotates, lists and revokes sessions stored before (format 4: a string key and an index)', async () => {
    const raw = new Redis(redis.url);
    try {
      const user = 'legacy-user';
      const sids = ['legacy000000000000000a', 'legacy000000000000000b'];
      const now = Date.now();
      for (const sid of sids) {
        const head = Buffer.alloc(17);
        head[0] = 4;
        head.writeUIntBE(now, 1, 6);
        head.writeUIntBE(now, 7, 6);
        head.writeUInt32BE(0, 13);
        const len = (s: string) => { const b = Buffer.alloc(2); b.writeUInt16BE(Buffer.byteLength(s)); return b; };
        await raw.set(`gwtest:s:{${sid}}`, Buffer.concat([head, len(user), Buffer.from(user), len('v1'), Buffer.from('v1')]), 'EX', 60);
        for (const index of userIndexKeys(user)) await raw.zadd(`gwtest:${index}`, now, sid);
      }
      expect(await store.isLive(sids[0]!)).toBe(true);
      expect(await store.rotateRefresh(sids[0]!, { generation: 0, ttlSeconds: 60, graceMs: 1000, nowMs: Date.now() })).toEqual({ result: 'rotated', sub: user, uv: 'v1', generation: 1, retry: false });
      const fresh = await store.createSession({ sub: user, uv: 'v1' }, 60);
      expect((await store.listSessions(user)).map((s) => s.sid).sort()).toEqual([...sids, fresh].sort());
      expect(await store.revokeUser(user)).toBe(3);
      for (const sid of [...sids, fresh]) expect(await store.isLive(sid)).toBe(false);
      expect(await raw.exists(`gwtest:s:{${sids[1]}}`)).toBe(0);
    } finally {
      await raw.quit();
    }
  });

  it('keeps a session at or under 300 bytes, fresh and after refreshes (INFO memory over 4,000 sessions, 1 and 4 per user)', async () => {
    const raw = new Redis(redis.url);
    try {
      for (const perUser of [1, 4]) {
        const bytes = await measureSessionBytes(store, raw, 4000, perUser);
        console.log(`session bytes (INFO memory, ${perUser} per user): ${JSON.stringify(bytes)}`);
        expect(bytes.fresh).toBeLessThanOrEqual(300);
        expect(bytes.afterOneRefresh).toBeLessThanOrEqual(300);
        expect(bytes.afterThreeRefreshes).toBeLessThanOrEqual(300);
      }
    } finally {
      await raw.quit();
    }
  });
});

describe('RedisCounters rate buckets', () => {
  const commands = async (raw: Redis): Promise<number> => {
    const stats = await raw.info('commandstats');
    return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0) + Number(/cmdstat_eval:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  };

  it('sends the takes of one bucket that arrive while its command is out as one command, and each bucket its own', async () => {
    const raw = new Redis(redis.url);
    try {
      await counters.take('warm-up', 10, 60);
      const before = await commands(raw);
      const [a, b] = await Promise.all([
        Promise.all(Array.from({ length: 40 }, () => counters.take('lanes-a', 30, 60))),
        Promise.all(Array.from({ length: 5 }, () => counters.take('lanes-b', 30, 60))),
      ]);
      // Per bucket: the first take on its own, the rest together once it answered.
      expect(await commands(raw) - before).toBe(4);
      expect(a.filter((d) => d.allowed)).toHaveLength(30);
      expect(a.map((d) => d.remaining).slice(0, 30)).toEqual(Array.from({ length: 30 }, (_, i) => 29 - i));
      expect(b.map((d) => d.remaining)).toEqual([29, 28, 27, 26, 25]);
      // A quiet bucket: one command per take, nothing waits.
      const quiet = await commands(raw);
      for (let i = 0; i < 3; i++) expect((await counters.take('lanes-c', 30, 60)).remaining).toBe(29 - i);
      expect(await commands(raw) - quiet).toBe(3);
    } finally {
      await raw.quit();
    }
  });

  it('fails the takes waiting behind a command that failed at once, and serves the bucket again when Redis is back', async () => {
    const options: RedisStoreOptions = {
      topology: { mode: 'single', url: redis.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 200, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0, durability: 'available' as const,
    };
    const own = new RedisCounters(options, silentLogger);
    const raw = new Redis(redis.url);
    try {
      expect(await own.waitUntilReady(5000)).toBe(true);
      const before = await commands(raw);
      // Redis holds every command for a second: the first take's command runs past its deadline.
      await raw.client('PAUSE', 1000, 'ALL');
      const started = Date.now();
      const settled = await Promise.allSettled(Array.from({ length: 6 }, () => own.take('lanes-outage', 10, 60)));
      const took = Date.now() - started;
      expect(settled.map((s) => s.status)).toEqual(Array(6).fill('rejected'));
      for (const s of settled) expect((s as PromiseRejectedResult).reason.name).toBe('StoreUnavailableError');
      expect(took).toBeLessThan(900);
      await new Promise((r) => setTimeout(r, 1100 - took));
      expect((await own.take('lanes-outage', 10, 60)).allowed).toBe(true);
      // The five that waited were never sent: the outage cost one command, and the take after it one.
      expect(await commands(raw) - before).toBe(2);
    } finally {
      await raw.quit();
      await own.close();
    }
  });
});
