import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { SessionStore } from '../../src/stores/sessions/session-store.js';

export interface SessionBytes {
  sessions: number;
  /** used_memory growth per session: just created, after one refresh, after three. */
  fresh: number;
  afterOneRefresh: number;
  afterThreeRefreshes: number;
}

/**
 * What a session costs in Redis, as `INFO memory` sees it: used_memory before and after `count`
 * sessions (`perUser` per user, default 4; 20-byte user names, a 16-byte credential version, the default 60-day TTL), so
 * the key's expiry entry, the dict slots and both copies of the user index are in it (MEMORY USAGE of
 * one key leaves those out). Run on a Redis holding nothing else that changes meanwhile.
 */
export async function measureSessionBytes(store: SessionStore, raw: Redis, count: number, perUser = 4): Promise<SessionBytes> {
  const used = async () => Number(/^used_memory:(\d+)/m.exec(await raw.info('memory'))![1]);
  const sids: string[] = Array(count).fill('');
  const users = Array.from({ length: Math.ceil(count / perUser) }, () => `user-${randomBytes(7).toString('hex')}`);
  const inBatches = async (work: (sid: string, i: number) => Promise<unknown>) => {
    for (let i = 0; i < sids.length; i += 200) await Promise.all(sids.slice(i, i + 200).map((sid, j) => work(sid, i + j)));
  };
  const ttl = 5_184_000;
  const before = await used();
  await inBatches(async (_, i) => {
    sids[i] = await store.createSession({ sub: users[i % users.length]!, uv: 'abcdefghijklmnop' }, ttl);
  });
  const fresh = await used();
  const rotate = (generation: number) => inBatches((sid) => store.rotateRefresh(sid, { generation, ttlSeconds: ttl, graceMs: 0, nowMs: Date.now() }));
  await rotate(0);
  const one = await used();
  await rotate(1);
  await rotate(2);
  const three = await used();
  for (let i = 0; i < users.length; i += 200) await Promise.all(users.slice(i, i + 200).map((user) => store.revokeUser(user)));
  const per = (bytes: number) => Math.round((bytes - before) / count);
  return { sessions: count, fresh: per(fresh), afterOneRefresh: per(one), afterThreeRefreshes: per(three) };
}
