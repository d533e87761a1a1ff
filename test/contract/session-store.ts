import { describe, expect, it } from 'vitest';
import type { SessionStore } from '../../src/stores/sessions/session-store.js';
import { sessionIdFor } from '../../src/stores/sessions/user-index.js';

export interface StoreHarness<S> {
  store: () => S;
  /** Moves the store's notion of time forward (the memory store's clock; real time for Redis). */
  fastForward: (ms: number) => Promise<void>;
  now: () => number;
}

let n = 0;
/** A well-formed id of a session no store has. */
const sid = () => sessionIdFor('nobody', 0, `unknown${String(++n).padStart(15, '0')}`);
const userName = () => `u${String(++n).padStart(8, '0')}`;
const rotation = (generation: number, nowMs: number, graceMs = 0) => ({ generation, ttlSeconds: 60, graceMs, nowMs });
const session = (sub: string) => ({ sub, uv: 'v1' });
const rotated = (generation: number, retry = false) => ({ result: 'rotated', sub: 'alice', uv: 'v1', generation, retry });

/** One contract, every session store (memory; Redis on one node, Sentinel and Cluster). */
export function sessionStoreContract(name: string, h: StoreHarness<SessionStore>): void {
  describe(`SessionStore contract: ${name}`, () => {
    it('creates a live session and revokes it', async () => {
      const s = await h.store().createSession(session('alice'), 60);
      expect(await h.store().isLive(s)).toBe(true);
      // It answers the user of the session it ended (the audit line names them)...
      expect(await h.store().revoke(s)).toBe('alice');
      expect(await h.store().isLive(s)).toBe(false);
      // ...and revoking what is gone is no error, and names nobody.
      expect(await h.store().revoke(s)).toBeUndefined();
      expect(await h.store().revoke(sid())).toBeUndefined();
    });

    it('rotates generation by generation and returns the subject', async () => {
      const s = await h.store().createSession(session('alice'), 60);
      expect(await h.store().rotateRefresh(s, rotation(0, h.now()))).toEqual(rotated(1));
      expect(await h.store().rotateRefresh(s, rotation(1, h.now()))).toEqual(rotated(2));
      expect(await h.store().isLive(s)).toBe(true);
    });

    it('treats a rotated-away generation as reuse and revokes the whole session, even in the same millisecond (no grace)', async () => {
      const t = h.now();
      const s = await h.store().createSession(session('alice'), 60);
      await h.store().rotateRefresh(s, rotation(0, t));
      expect(await h.store().rotateRefresh(s, rotation(0, t))).toEqual({ result: 'reused' });
      expect(await h.store().isLive(s)).toBe(false);
      expect(await h.store().rotateRefresh(s, rotation(1, h.now()))).toEqual({ result: 'unknown' });
    });

    it('answers a retry within the grace period with the same successor, and keeps the session', async () => {
      const t = h.now();
      const s = await h.store().createSession(session('alice'), 60);
      expect(await h.store().rotateRefresh(s, rotation(0, t, 5000))).toEqual(rotated(1));
      expect(await h.store().rotateRefresh(s, rotation(0, t + 4999, 5000))).toEqual(rotated(1, true));
      expect(await h.store().rotateRefresh(s, rotation(0, t + 4999, 5000))).toEqual(rotated(1, true));
      expect(await h.store().isLive(s)).toBe(true);
      // The successor, used: the chain goes on from there.
      expect(await h.store().rotateRefresh(s, rotation(1, t + 4999, 5000))).toEqual(rotated(2));
      expect(await h.store().isLive(s)).toBe(true);
    });

    it('answers a retry long past the grace period with the same successor while that successor is unused (a client that lost its answers to 503s)', async () => {
      const t = h.now();
      const s = await h.store().createSession(session('alice'), 60);
      await h.store().rotateRefresh(s, rotation(0, t, 5000));
      expect(await h.store().rotateRefresh(s, rotation(0, t + 5000, 5000))).toEqual(rotated(1, true));
      expect(await h.store().rotateRefresh(s, rotation(0, t + 3_600_000, 5000))).toEqual(rotated(1, true));
      expect(await h.store().isLive(s)).toBe(true);
      // Once the successor is presented, the parent is a stolen copy: reuse ends the session, however late.
      expect(await h.store().rotateRefresh(s, rotation(1, t + 3_600_001, 5000))).toEqual(rotated(2));
      expect(await h.store().rotateRefresh(s, rotation(0, t + 3_600_002, 5000))).toEqual({ result: 'reused' });
      expect(await h.store().isLive(s)).toBe(false);
    });

    it('revokes on the parent of a used successor presented hours later (a stolen token replayed)', async () => {
      const t = h.now();
      const s = await h.store().createSession(session('alice'), 60);
      await h.store().rotateRefresh(s, rotation(0, t, 5000));
      await h.store().rotateRefresh(s, rotation(1, t + 1, 5000));
      expect(await h.store().rotateRefresh(s, rotation(1, t + 7_200_000, 5000))).toEqual(rotated(2, true));
      expect(await h.store().rotateRefresh(s, rotation(0, t + 7_200_000, 5000))).toEqual({ result: 'reused' });
      expect(await h.store().isLive(s)).toBe(false);
    });

    it('revokes on a rotated-away generation whose successor was used, even within the grace period', async () => {
      const t = h.now();
      const s = await h.store().createSession(session('alice'), 60);
      await h.store().rotateRefresh(s, rotation(0, t, 5000));
      await h.store().rotateRefresh(s, rotation(1, t + 1, 5000));
      expect(await h.store().rotateRefresh(s, rotation(0, t + 2, 5000))).toEqual({ result: 'reused' });
      expect(await h.store().isLive(s)).toBe(false);
    });

    it('takes a generation ahead of its own as a rotation it lost (a failover): the chain goes on from it', async () => {
      const s = await h.store().createSession(session('alice'), 60);
      expect(await h.store().rotateRefresh(s, rotation(3, h.now()))).toEqual(rotated(4));
      expect(await h.store().rotateRefresh(s, rotation(2, h.now()))).toEqual({ result: 'reused' });
    });

    it('keeps the rotation time the caller\'s clock gave, months after the session began', async () => {
      const t = h.now();
      const day = 24 * 3600 * 1000;
      const s = await h.store().createSession(session('alice'), 60);
      await h.store().rotateRefresh(s, rotation(0, t + 30 * day, 5000));
      await h.store().rotateRefresh(s, rotation(1, t + 80 * day, 5000));
      expect(await h.store().rotateRefresh(s, rotation(1, t + 80 * day + 1000, 5000))).toEqual(rotated(2, true));
      expect((await h.store().listSessions('alice')).find((x) => x.sid === s)?.refreshedAtMs).toBe(t + 80 * day);
      expect(await h.store().rotateRefresh(s, rotation(2, t + 81 * day, 5000))).toEqual(rotated(3));
      expect(await h.store().rotateRefresh(s, rotation(1, t + 81 * day, 5000))).toEqual({ result: 'reused' });
    });

    it('answers unknown for a session it does not have', async () => {
      expect(await h.store().rotateRefresh(sid(), rotation(0, h.now()))).toEqual({ result: 'unknown' });
    });

    it('of 20 concurrent rotations of one generation within grace, all end on the same successor and the session lives', async () => {
      const s = await h.store().createSession(session('alice'), 60);
      const outcomes = await Promise.all(Array.from({ length: 20 }, () => h.store().rotateRefresh(s, rotation(0, h.now(), 5000))));
      expect(outcomes.filter((o) => o.result === 'rotated' && !o.retry)).toHaveLength(1);
      expect(outcomes.every((o) => o.result === 'rotated' && o.generation === 1)).toBe(true);
      expect(await h.store().isLive(s)).toBe(true);
    });

    it('expires a session after its TTL, and a rotation renews the TTL', async () => {
      const a = await h.store().createSession(session('alice'), 1);
      const b = await h.store().createSession(session('bob'), 1);
      await h.store().rotateRefresh(b, { ...rotation(0, h.now()), ttlSeconds: 60 });
      await h.fastForward(1100);
      expect(await h.store().isLive(a)).toBe(false);
      expect(await h.store().isLive(b)).toBe(true);
    });

    it('tells onRevoked listeners each revoked session: by revoke, by user and by reuse, not a rotation', async () => {
      const heard: string[] = [];
      const unsubscribe = h.store().onRevoked((s) => heard.push(s));
      try {
        const user = `heard-${userName()}`;
        const [a, c, d] = [await h.store().createSession(session('alice'), 60), await h.store().createSession(session('alice'), 60), await h.store().createSession(session('alice'), 60)];
        const b = await h.store().createSession(session(user), 60);
        await h.store().revoke(a);
        await h.store().revokeUser(user);
        await h.store().rotateRefresh(c, rotation(0, h.now()));
        await h.store().rotateRefresh(c, rotation(0, h.now()));
        await h.store().rotateRefresh(d, rotation(0, h.now()));
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

    it('lists a user\'s live sessions, oldest first, without any token', async () => {
      const user = `user-${userName()}`;
      const a = await h.store().createSession(session(user), 60);
      await h.fastForward(5);
      const b = await h.store().createSession(session(user), 1);
      await h.store().createSession(session(`other-${user}`), 60);
      const rotatedAt = h.now();
      await h.store().rotateRefresh(a, rotation(0, rotatedAt));
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
      const user = `user-${userName()}`;
      const mine: string[] = [];
      for (let i = 0; i < 3; i++) mine.push(await h.store().createSession(session(user), 60));
      const theirs = await h.store().createSession(session(`other-${user}`), 60);
      await h.store().rotateRefresh(mine[0]!, rotation(0, h.now()));
      await h.store().revoke(mine[2]!);
      expect(await h.store().revokeUser(user)).toBe(2);
      for (const s of mine) expect(await h.store().isLive(s)).toBe(false);
      expect(await h.store().rotateRefresh(mine[0]!, rotation(1, h.now()))).toEqual({ result: 'unknown' });
      expect(await h.store().isLive(theirs)).toBe(true);
      expect(await h.store().listSessions(user)).toEqual([]);
      expect(await h.store().revokeUser(user)).toBe(0);
      // A new session of the user after that is not affected by the old revocation.
      const later = await h.store().createSession(session(user), 60);
      expect(await h.store().isLive(later)).toBe(true);
      expect((await h.store().listSessions(user)).map((s) => s.sid)).toEqual([later]);
    });

    it('revokes the sessions filed under a tag, across users, and only those; a tag of none revokes none', async () => {
      const [a, b] = [userName(), userName()];
      const tag = `oidc-sid ${userName()}`;
      const other = `oidc-sid ${userName()}`;
      const s1 = await h.store().createSession(session(a), 60);
      const s2 = await h.store().createSession(session(b), 60);
      const s3 = await h.store().createSession(session(a), 60);
      await h.store().tagSession(s1, [tag, `oidc-sub ${a}`], 60);
      await h.store().tagSession(s2, [tag], 60);
      await h.store().tagSession(s3, [other], 60);
      const heard: string[] = [];
      const off = h.store().onRevoked((r) => heard.push(r));
      expect(await h.store().revokeTagged(tag)).toBe(2);
      off();
      expect(await h.store().isLive(s1)).toBe(false);
      expect(await h.store().isLive(s2)).toBe(false);
      expect(await h.store().isLive(s3)).toBe(true);
      expect(heard).toEqual(expect.arrayContaining([s1, s2]));
      expect(await h.store().revokeTagged(tag)).toBe(0);
      expect(await h.store().revokeTagged(`oidc-sub ${a}`)).toBe(0);
      expect(await h.store().revokeTagged(other)).toBe(1);
      expect(await h.store().isLive(s3)).toBe(false);
    });

    it('remembers a marker once, for its TTL: a second sighting is false until it lapses', async () => {
      const marker = `logout ${userName()}`;
      expect(await h.store().firstSighting(marker, 1)).toBe(true);
      expect(await h.store().firstSighting(marker, 1)).toBe(false);
      expect(await h.store().firstSighting(`${marker}-other`, 1)).toBe(true);
      await h.fastForward(1100);
      expect(await h.store().firstSighting(marker, 1)).toBe(true);
      expect(await h.store().firstSighting(marker, 1)).toBe(false);
    });

    it('keeps a device note per session beside the user\'s sessions, for its TTL, and only the user\'s', async () => {
      const [alice, bob] = [userName(), userName()];
      const s1 = await h.store().createSession(session(alice), 60);
      // Every session outlives the test: the listing below must not depend on how fast a loaded machine gets there.
      const s2 = await h.store().createSession(session(alice), 60);
      const s3 = await h.store().createSession(session(alice), 60);
      const b1 = await h.store().createSession(session(bob), 60);
      expect(await h.store().sessionDevices(alice)).toEqual(new Map());
      const ua = 'Mozilla/5.0 <b>"x"</b> é';
      await h.store().noteSessionDevice(s1, alice, { address: '127.0.0.1', userAgent: ua }, 60);
      await h.store().noteSessionDevice(s2, alice, { address: '::1', userAgent: '' }, 2);
      await h.store().noteSessionDevice(b1, bob, { address: '10.0.0.2', userAgent: 'curl/8' }, 60);
      expect(await h.store().sessionDevices(alice)).toEqual(new Map([
        [s1, { address: '127.0.0.1', userAgent: ua }],
        [s2, { address: '::1', userAgent: '' }],
      ]));
      // The note is a record of its own: the sessions read as before, and one without a note is absent.
      expect((await h.store().listSessions(alice)).map((x) => x.sid)).toEqual([s1, s2, s3]);
      await h.fastForward(2100);
      // A note lapses with its TTL (its session lives on); a later note (another sign-in) keeps the others.
      await h.store().noteSessionDevice(s3, alice, { address: '192.0.2.7', userAgent: 'Firefox' }, 60);
      expect(await h.store().sessionDevices(alice)).toEqual(new Map([
        [s1, { address: '127.0.0.1', userAgent: ua }],
        [s3, { address: '192.0.2.7', userAgent: 'Firefox' }],
      ]));
      expect(await h.store().sessionDevices(bob)).toEqual(new Map([[b1, { address: '10.0.0.2', userAgent: 'curl/8' }]]));
      expect(await h.store().sessionDevices(userName())).toEqual(new Map());
    });

    it('pings', async () => {
      await expect(h.store().ping()).resolves.toBeUndefined();
    });
  });
}
