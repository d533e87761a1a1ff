import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { hashRefreshToken } from '../../src/tokens/refresh-token.js';
import type { TokenStore } from '../../src/tokens/store/types.js';

/**
 * What one session costs in Redis, by MEMORY USAGE of its key plus its share of the user's index
 * (100 sessions of one user, a typical 20-byte user name and the real credential-version length).
 */
export async function measureSessionBytes(store: TokenStore, raw: Redis, prefix: string): Promise<{ fresh: number; afterOneRefresh: number; after40Refreshes: number; indexShare: number }> {
  const user = `user-${randomBytes(7).toString('hex')}`;
  const sids = Array.from({ length: 100 }, () => randomBytes(16).toString('base64url'));
  const token = () => hashRefreshToken(randomBytes(32).toString('base64url'));
  const current = new Map<string, string>();
  for (const sid of sids) {
    current.set(sid, token());
    await store.createSession(sid, { sub: user, refreshHash: current.get(sid)!, uv: 'abcdefghijklmnop' }, 5_184_000);
  }
  const indexKeys = await raw.keys(`${prefix}u:*`);
  let indexBytes = 0;
  for (const k of indexKeys) {
    if ((await raw.zscore(k, sids[0]!)) !== null) indexBytes = Number(await raw.call('MEMORY', 'USAGE', k, 'SAMPLES', '0'));
  }
  const indexShare = Math.ceil(indexBytes / sids.length);
  const usage = async (sid: string) => Number(await raw.call('MEMORY', 'USAGE', `${prefix}s:{${sid}}`, 'SAMPLES', '0')) + indexShare;
  const rotate = async (sid: string, times: number) => {
    for (let i = 0; i < times; i++) {
      const next = token();
      await store.rotateRefresh(sid, { presentedHash: current.get(sid)!, nextHash: next, ttlSeconds: 5_184_000, graceMs: 0, nowMs: Date.now() });
      current.set(sid, next);
    }
  };
  const fresh = await usage(sids[0]!);
  await rotate(sids[1]!, 1);
  const afterOneRefresh = await usage(sids[1]!);
  await rotate(sids[2]!, 40);
  const after40Refreshes = await usage(sids[2]!);
  await store.revokeUser(user);
  return { fresh, afterOneRefresh, after40Refreshes, indexShare };
}
