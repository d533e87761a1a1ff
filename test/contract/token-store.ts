import { describe, expect, it } from 'vitest';
import type { TokenStore } from '../../src/tokens/store/types.js';

export interface StoreHarness {
  store: () => TokenStore;
  /** Moves the store's notion of time forward (the memory store's clock; real time for Redis). */
  fastForward: (ms: number) => Promise<void>;
  now: () => number;
}

let n = 0;
const sid = () => `sid${String(++n).padStart(19, '0')}`;
const rotation = (presentedHash: string, nextHash: string, nowMs: number, graceMs = 0) =>
  ({ presentedHash, nextHash, ttlSeconds: 60, graceMs, nowMs });

/** One contract, every store (memory and real Redis). */
export function tokenStoreContract(name: string, h: StoreHarness): void {
  describe(`TokenStore contract: ${name}`, () => {
    it('creates a live session and revokes it', async () => {
      const s = sid();
      await h.store().createSession(s, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      expect(await h.store().isLive(s)).toBe(true);
      await h.store().revoke(s);
      expect(await h.store().isLive(s)).toBe(false);
    });

    it('rotates the current refresh hash and returns the subject', async () => {
      const s = sid();
      await h.store().createSession(s, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      expect(await h.store().rotateRefresh(s, rotation('h1', 'h2', h.now()))).toEqual({ result: 'rotated', sub: 'alice', uv: 'v1' });
      expect(await h.store().rotateRefresh(s, rotation('h2', 'h3', h.now()))).toEqual({ result: 'rotated', sub: 'alice', uv: 'v1' });
      expect(await h.store().isLive(s)).toBe(true);
    });

    it('treats a rotated-away hash as reuse and revokes the whole session, even in the same millisecond', async () => {
      const s = sid();
      const t = h.now();
      await h.store().createSession(s, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      await h.store().rotateRefresh(s, rotation('h1', 'h2', t));
      expect(await h.store().rotateRefresh(s, rotation('h1', 'x', t))).toEqual({ result: 'reused' });
      expect(await h.store().isLive(s)).toBe(false);
      expect(await h.store().rotateRefresh(s, rotation('h2', 'h3', h.now()))).toEqual({ result: 'unknown' });
    });

    it('refuses a rotated-away hash within the grace period without revoking', async () => {
      const s = sid();
      const t = h.now();
      await h.store().createSession(s, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      await h.store().rotateRefresh(s, rotation('h1', 'h2', t, 5000));
      expect(await h.store().rotateRefresh(s, rotation('h1', 'x', t + 4999, 5000))).toEqual({ result: 'grace' });
      expect(await h.store().isLive(s)).toBe(true);
      expect(await h.store().rotateRefresh(s, rotation('h2', 'h3', t + 4999, 5000))).toEqual({ result: 'rotated', sub: 'alice', uv: 'v1' });
      expect(await h.store().rotateRefresh(s, rotation('h1', 'x', t + 5000, 5000))).toEqual({ result: 'reused' });
      expect(await h.store().isLive(s)).toBe(false);
    });

    it('remembers the last 32 rotated-away hashes: an older one is unknown, a newer one is reuse', async () => {
      const s = sid();
      const t = h.now();
      await h.store().createSession(s, { sub: 'alice', refreshHash: 'r0', uv: 'v1' }, 60);
      for (let i = 0; i < 40; i++) await h.store().rotateRefresh(s, rotation(`r${i}`, `r${i + 1}`, t + i));
      expect(await h.store().rotateRefresh(s, rotation('r0', 'x', t + 50))).toEqual({ result: 'unknown' });
      expect(await h.store().isLive(s)).toBe(true);
      expect(await h.store().rotateRefresh(s, rotation('r39', 'x', t + 50))).toEqual({ result: 'reused' });
      expect(await h.store().isLive(s)).toBe(false);
    });

    it('judges grace and reuse right across months of rotations (rotation times are the caller\'s clock)', async () => {
      const s = sid();
      const t = h.now();
      const day = 24 * 3600 * 1000;
      await h.store().createSession(s, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      await h.store().rotateRefresh(s, rotation('h1', 'h2', t));
      await h.store().rotateRefresh(s, rotation('h2', 'h3', t + 30 * day));
      await h.store().rotateRefresh(s, rotation('h3', 'h4', t + 80 * day));
      const later = t + 80 * day + 1000;
      // h3 was rotated away 1 s ago: within a 5 s grace. h2, 50 days ago, and h1, 80 days ago: reuse.
      expect(await h.store().rotateRefresh(s, rotation('h3', 'x', later, 5000))).toEqual({ result: 'grace' });
      expect(await h.store().rotateRefresh(s, rotation('h2', 'x', later, 10 * day))).toEqual({ result: 'reused' });
      expect(await h.store().isLive(s)).toBe(false);
    });

    it('answers unknown for a hash the session never had, and keeps the session', async () => {
      const s = sid();
      await h.store().createSession(s, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      expect(await h.store().rotateRefresh(s, rotation('nope', 'x', h.now()))).toEqual({ result: 'unknown' });
      expect(await h.store().rotateRefresh(sid(), rotation('h1', 'x', h.now()))).toEqual({ result: 'unknown' });
      expect(await h.store().isLive(s)).toBe(true);
    });

    it('lets exactly one of 20 concurrent rotations with one hash win', async () => {
      const s = sid();
      await h.store().createSession(s, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) => h.store().rotateRefresh(s, rotation('h1', `next${i}`, h.now()))),
      );
      expect(outcomes.filter((o) => o.result === 'rotated')).toHaveLength(1);
    });

    it('revokes by the current or an earlier refresh hash, not by another', async () => {
      const a = sid();
      await h.store().createSession(a, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
      expect(await h.store().revokeByRefresh(a, 'other')).toBe(false);
      expect(await h.store().isLive(a)).toBe(true);
      expect(await h.store().revokeByRefresh(a, 'h1')).toBe(true);
      expect(await h.store().isLive(a)).toBe(false);

      const b = sid();
      await h.store().createSession(b, { sub: 'bob', refreshHash: 'h1', uv: 'v1' }, 60);
      await h.store().rotateRefresh(b, rotation('h1', 'h2', h.now()));
      expect(await h.store().revokeByRefresh(b, 'h1')).toBe(true);
      expect(await h.store().isLive(b)).toBe(false);
      expect(await h.store().revokeByRefresh(sid(), 'h1')).toBe(false);
    });

    it('expires a session after its TTL, and a rotation renews the TTL', async () => {
      const a = sid();
      const b = sid();
      await h.store().createSession(a, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 1);
      await h.store().createSession(b, { sub: 'bob', refreshHash: 'h1', uv: 'v1' }, 1);
      await h.store().rotateRefresh(b, { ...rotation('h1', 'h2', h.now()), ttlSeconds: 60 });
      await h.fastForward(1100);
      expect(await h.store().isLive(a)).toBe(false);
      expect(await h.store().isLive(b)).toBe(true);
    });

    it('counts hits in a window, peeks, resets and expires counters', async () => {
      const key = `k:${sid()}`;
      expect(await h.store().peek(key)).toEqual({ count: 0, resetSeconds: 0 });
      expect((await h.store().hit(key, 60)).count).toBe(1);
      const second = await h.store().hit(key, 60);
      expect(second.count).toBe(2);
      expect(second.resetSeconds).toBeGreaterThan(55);
      expect(second.resetSeconds).toBeLessThanOrEqual(60);
      expect((await h.store().peek(key)).count).toBe(2);
      await h.store().reset(key);
      expect((await h.store().peek(key)).count).toBe(0);
      await h.store().hit(key, 1);
      await h.fastForward(1100);
      expect((await h.store().peek(key)).count).toBe(0);
    });

    it('rate-limits with GCRA: a burst of limit, then refusals with Retry-After, then refill', async () => {
      const key = `r:${sid()}`;
      const taken = [];
      for (let i = 0; i < 4; i++) taken.push(await h.store().take(key, 3, 60));
      expect(taken.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(taken.map((d) => d.remaining)).toEqual([2, 1, 0, 0]);
      expect(taken[3]!.retryAfterSeconds).toBeGreaterThanOrEqual(19);
      expect(taken[3]!.retryAfterSeconds).toBeLessThanOrEqual(20);
      expect(taken[2]!.resetSeconds).toBe(60);

      const fast = `r:${sid()}`;
      expect((await h.store().take(fast, 2, 1)).allowed).toBe(true);
      expect((await h.store().take(fast, 2, 1)).allowed).toBe(true);
      expect((await h.store().take(fast, 2, 1)).allowed).toBe(false);
      await h.fastForward(600);
      expect((await h.store().take(fast, 2, 1)).allowed).toBe(true);
    });

    it('never lets concurrent takes exceed the limit', async () => {
      const key = `r:${sid()}`;
      const decisions = await Promise.all(Array.from({ length: 12 }, () => h.store().take(key, 5, 60)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
    });

    it('tells onRevoked listeners each revoked session: by revoke, by refresh hash and by reuse, not a rotation', async () => {
      const heard: string[] = [];
      const unsubscribe = h.store().onRevoked((s) => heard.push(s));
      try {
        const [a, b, c, d] = [sid(), sid(), sid(), sid()];
        for (const s of [a, b, c, d]) await h.store().createSession(s, { sub: 'alice', refreshHash: 'h1', uv: 'v1' }, 60);
        await h.store().revoke(a);
        await h.store().revokeByRefresh(b, 'h1');
        await h.store().rotateRefresh(c, rotation('h1', 'h2', h.now()));
        await h.store().rotateRefresh(c, rotation('h1', 'h3', h.now()));
        await h.store().rotateRefresh(d, rotation('h1', 'h2', h.now()));
        await h.store().revokeByRefresh(d, 'other');
        // The Redis store may hear its own revocations twice (itself and the channel): wait, then dedupe.
        await new Promise((r) => setTimeout(r, 100));
        expect([...new Set(heard)]).toEqual([a, b, c]);
        unsubscribe();
        await h.store().revoke(d);
        await new Promise((r) => setTimeout(r, 100));
        expect(new Set(heard).has(d)).toBe(false);
      } finally {
        unsubscribe();
      }
    });

    it('lists a user\'s live sessions, oldest first, without any token or hash', async () => {
      const user = `user-${sid()}`;
      const [a, b, c] = [sid(), sid(), sid()];
      await h.store().createSession(a, { sub: user, refreshHash: 'h1', uv: 'v1' }, 60);
      await h.fastForward(5);
      await h.store().createSession(b, { sub: user, refreshHash: 'h1', uv: 'v1' }, 1);
      await h.store().createSession(c, { sub: `other-${user}`, refreshHash: 'h1', uv: 'v1' }, 60);
      const rotatedAt = h.now();
      await h.store().rotateRefresh(a, rotation('h1', 'h2', rotatedAt));
      const listed = await h.store().listSessions(user);
      expect(listed.map((s) => s.sid)).toEqual([a, b]);
      for (const s of listed) expect(Object.keys(s).sort()).toEqual(['createdAtMs', 'refreshedAtMs', 'sid']);
      expect(listed[0]!.refreshedAtMs).toBe(rotatedAt);
      expect(listed[1]!.refreshedAtMs).toBe(listed[1]!.createdAtMs);
      expect(listed[0]!.createdAtMs).toBeLessThanOrEqual(listed[1]!.createdAtMs);
      // Revoked and expired sessions are not listed.
      await h.store().revoke(a);
      await h.fastForward(1100);
      expect(await h.store().listSessions(user)).toEqual([]);
      expect(await h.store().listSessions(`nobody-${user}`)).toEqual([]);
    });

    it('revokes every session of a user, and only theirs, and counts them', async () => {
      const user = `user-${sid()}`;
      const mine = [sid(), sid(), sid()];
      const theirs = sid();
      for (const s of mine) await h.store().createSession(s, { sub: user, refreshHash: 'h1', uv: 'v1' }, 60);
      await h.store().createSession(theirs, { sub: `other-${user}`, refreshHash: 'h1', uv: 'v1' }, 60);
      await h.store().rotateRefresh(mine[0]!, rotation('h1', 'h2', h.now()));
      await h.store().revoke(mine[2]!);
      expect(await h.store().revokeUser(user)).toBe(2);
      for (const s of mine) expect(await h.store().isLive(s)).toBe(false);
      expect(await h.store().rotateRefresh(mine[0]!, rotation('h2', 'h3', h.now()))).toEqual({ result: 'unknown' });
      expect(await h.store().isLive(theirs)).toBe(true);
      expect(await h.store().listSessions(user)).toEqual([]);
      expect(await h.store().revokeUser(user)).toBe(0);
      // A new session of the user after that is not affected by the old revocation.
      const later = sid();
      await h.store().createSession(later, { sub: user, refreshHash: 'h1', uv: 'v1' }, 60);
      expect(await h.store().isLive(later)).toBe(true);
      expect((await h.store().listSessions(user)).map((s) => s.sid)).toEqual([later]);
    });

    it('pings', async () => {
      await expect(h.store().ping()).resolves.toBeUndefined();
    });
  });
}
