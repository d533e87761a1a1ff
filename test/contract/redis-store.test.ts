import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { RedisCounters } from '../../src/stores/counters/redis-counters.js';
import { RedisSessionStore } from '../../src/stores/sessions/redis-session-store.js';
import type { RedisStoreOptions } from '../../src/stores/redis/store-options.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { readSessionRecord } from '../../src/stores/sessions/session-record.js';
import { hashSlot, userIndexKeys, userTag } from '../../src/stores/sessions/user-index.js';
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

/** A second store on the same Redis, as another instance of the gateway with its own settings, once connected. */
async function another(settings: Partial<RedisStoreOptions> = {}): Promise<RedisSessionStore> {
  const other = new RedisSessionStore({
    topology: { mode: 'single', url: redis.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0, durability: 'available' as const, ...settings,
  }, silentLogger);
  expect(await other.waitUntilReady(5000)).toBe(true);
  return other;
}

describe('RedisSessionStore keys', () => {
  it('keeps a user\'s sessions in one hash of theirs (one cluster slot), one field each, no token', async () => {
    const own = await another({ writeLegacySessions: false });
    const raw = new Redis(redis.url);
    try {
      const sid = await own.createSession({ sub: 'alice-keys', uv: 'v1' }, 60);
      await own.rotateRefresh(sid, { generation: 0, ttlSeconds: 60, graceMs: 0, nowMs: Date.now() });
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
      await own.close();
    }
  });

  it('with store.writeLegacySessions (the default) also keeps what c247b92 reads: s:{sid} in format 4 and the id in u:{tag}, on the hash\'s slot, as long as the session', async () => {
    const raw = new Redis(redis.url);
    try {
      const sid = await store.createSession({ sub: 'alice-legacy', uv: 'v1' }, 60);
      const tag = userTag('alice-legacy');
      expect(sid.slice(0, 23)).toBe(`${tag}0`);
      expect(hashSlot(sid)).toBe(hashSlot(tag));
      expect((await raw.keys(`*${tag}*`)).sort()).toEqual([`gwtest:s:{${sid}}`, `gwtest:ss:{${tag}}`, `gwtest:u:{${tag}}`]);
      // The session's value carries until when its record is kept (4 bytes after the credential version).
      const value = await raw.hgetBuffer(`gwtest:ss:{${tag}}`, sid.slice(23));
      expect(value!.length).toBe(1 + 6 + 6 + 4 + 4 + 2 + 'v1'.length + 4);
      expect(value!.readUInt32BE(value!.length - 4)).toBe(value!.readUInt32BE(17));
      // The record as c247b92 wrote its sessions (no credential version: it never reads one for these).
      const record = readSessionRecord(await raw.getBuffer(`gwtest:s:{${sid}}`));
      expect(record).toMatchObject({ sub: 'alice-legacy', generation: 0 });
      expect(await raw.zrange(`gwtest:u:{${tag}}`, '0', '-1')).toEqual([sid]);
      expect(await raw.ttl(`gwtest:s:{${sid}}`)).toBeGreaterThan(50);
      // A rotation renews it with the session; the user's listing shows the session once.
      await raw.expire(`gwtest:s:{${sid}}`, 30);
      await raw.expire(`gwtest:u:{${tag}}`, 30);
      expect(await store.rotateRefresh(sid, { generation: 0, ttlSeconds: 120, graceMs: 0, nowMs: Date.now() })).toMatchObject({ result: 'rotated', generation: 1 });
      expect(await raw.ttl(`gwtest:s:{${sid}}`)).toBeGreaterThan(110);
      expect(await raw.ttl(`gwtest:u:{${tag}}`)).toBeGreaterThan(110);
      expect(readSessionRecord(await raw.getBuffer(`gwtest:s:{${sid}}`))).toMatchObject({ sub: 'alice-legacy', generation: 1 });
      expect((await store.listSessions('alice-legacy')).map((s) => s.sid)).toEqual([sid]);
      // A revocation here deletes it too (the hash keeps its user name until it expires).
      await store.revoke(sid);
      expect(await raw.keys(`*${tag}*`)).toEqual([`gwtest:ss:{${tag}}`]);
    } finally {
      await raw.quit();
    }
  });

  it('honours a revocation made as c247b92 makes it (its record deleted, its id published): on the next check, rotation and listing', async () => {
    const raw = new Redis(redis.url);
    // Another instance, with its liveness cache warm: the message alone must not be needed.
    const other = await another();
    try {
      const user = 'carol-legacy';
      const [a, b, c] = [await store.createSession({ sub: user, uv: 'v1' }, 60), await store.createSession({ sub: user, uv: 'v1' }, 60), await store.createSession({ sub: user, uv: 'v1' }, 60)];
      for (const sid of [a, b, c]) expect(await other.isLive(sid)).toBe(true);
      // c247b92's REVOKE script: DEL s:{sid} and PUBLISH the id. Here without the publish: the record is the truth.
      for (const sid of [a, b]) expect(await raw.del(`gwtest:s:{${sid}}`)).toBe(1);
      expect(await store.isLive(a)).toBe(false);
      expect(await store.rotateRefresh(b, { generation: 0, ttlSeconds: 60, graceMs: 1000, nowMs: Date.now() })).toEqual({ result: 'unknown' });
      // The session is gone from the user's hash too, for releases that read only the hash (5318de5).
      expect(await raw.hexists(`gwtest:ss:{${userTag(user)}}`, a.slice(23))).toBe(0);
      expect(await raw.hexists(`gwtest:ss:{${userTag(user)}}`, b.slice(23))).toBe(0);
      // With the publish, a warm cache on another instance lets it go at once.
      await raw.del(`gwtest:s:{${c}}`);
      await raw.publish('gwtest:revoked', c);
      await expect.poll(() => other.isLive(c), { timeout: 2000 }).toBe(false);
      expect(await store.listSessions(user)).toEqual([]);
      const d = await store.createSession({ sub: user, uv: 'v1' }, 60);
      await raw.del(`gwtest:s:{${d}}`);
      expect(await store.listSessions(user)).toEqual([]);
      expect(await store.isLive(d)).toBe(false);
    } finally {
      await raw.quit();
      await other.close();
    }
  });

  it('lets c247b92\'s revocation of a user find this release\'s sessions (its index), and counts each session of a user once', async () => {
    const raw = new Redis(redis.url);
    try {
      const user = 'dave-legacy';
      const sids = [await store.createSession({ sub: user, uv: 'v1' }, 60), await store.createSession({ sub: user, uv: 'v1' }, 60)];
      // What c247b92's revokeUser reads: both copies of the index, then each s:{sid} (format 4, the user's).
      const indexed = new Set<string>();
      for (const index of userIndexKeys(user)) for (const sid of await raw.zrange(`gwtest:${index}`, '0', '-1')) indexed.add(sid);
      expect([...indexed].sort()).toEqual([...sids].sort());
      for (const sid of sids) expect(readSessionRecord(await raw.getBuffer(`gwtest:s:{${sid}}`))?.sub).toBe(user);
      expect((await store.listSessions(user)).length).toBe(2);
      expect(await store.revokeUser(user)).toBe(2);
      expect(await raw.keys(`gwtest:s:{${userTag(user)}*`)).toEqual([]);
    } finally {
      await raw.quit();
    }
  });

  it('stops writing them with store.writeLegacySessions false, and still honours those written before until they lapse', async () => {
    const off = await another({ writeLegacySessions: false });
    const raw = new Redis(redis.url);
    try {
      const user = 'erin-legacy';
      const before = await store.createSession({ sub: user, uv: 'v1' }, 60);
      const after = await off.createSession({ sub: user, uv: 'v1' }, 60);
      expect(await raw.exists(`gwtest:s:{${after}}`)).toBe(0);
      // A rotation there keeps the record as it was (it lapses at its mark), and does not renew it.
      await raw.expire(`gwtest:s:{${before}}`, 30);
      expect(await off.rotateRefresh(before, { generation: 0, ttlSeconds: 60, graceMs: 0, nowMs: Date.now() })).toMatchObject({ result: 'rotated' });
      expect(await raw.ttl(`gwtest:s:{${before}}`)).toBeLessThanOrEqual(30);
      await raw.del(`gwtest:s:{${before}}`);
      expect(await off.isLive(before)).toBe(false);
      expect(await off.isLive(after)).toBe(true);
    } finally {
      await raw.quit();
      await off.close();
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

  it('keeps a session at or under 300 bytes, fresh and after refreshes (INFO memory over 4,000 sessions, 1 and 4 per user); under 800 with the legacy record', async () => {
    const raw = new Redis(redis.url);
    const off = await another({ writeLegacySessions: false });
    try {
      for (const [legacy, under, bound] of [[false, off, 300], [true, store, 800]] as const) {
        for (const perUser of [1, 4]) {
          const bytes = await measureSessionBytes(under, raw, 4000, perUser);
          console.log(`session bytes (INFO memory, ${perUser} per user, writeLegacySessions ${legacy}): ${JSON.stringify(bytes)}`);
          expect(bytes.fresh).toBeLessThanOrEqual(bound);
          expect(bytes.afterOneRefresh).toBeLessThanOrEqual(bound);
          expect(bytes.afterThreeRefreshes).toBeLessThanOrEqual(bound);
        }
      }
    } finally {
      await raw.quit();
      await off.close();
    }
  }, 60_000);
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
