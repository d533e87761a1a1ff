import { Duplex } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { Principal } from '../../src/core/principal.js';
import { HttpProblem } from '../../src/http/problem.js';
import { silentLogger } from '../../src/log.js';
import { Tunnels, type TunnelChecks } from '../../src/proxy/tunnels.js';
import { StoreUnavailableError } from '../../src/stores/store-contracts.js';

const bearer = (sid: string, exp: number): Principal => ({ user: 'bob', via: 'bearer', groups: undefined, ownGroups: false, sid, expiresAt: exp, ambient: false, proof: 't', credential: undefined });
const basic = (user: string): Principal => ({ user, via: 'basic', groups: undefined, ownGroups: false, sid: undefined, expiresAt: undefined, ambient: true, proof: 'v1', credential: undefined });

/** A socket stand-in: accepts writes, reads nothing; ended, it closes (as a peer answering the FIN would). */
const socket = () => new Duplex({
  read() {},
  write(_chunk, _enc, cb) { cb(); },
  final(cb) {
    this.push(null);
    cb();
  },
});
const realSetTimeout = setTimeout;
const realClearTimeout = clearTimeout;
const closed = (s: Duplex) => new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));

function harness(recheckMs = 20) {
  const listeners = new Set<(sid: string) => void>();
  const state = { versions: new Map([['alice', 'v1']]), tokenError: undefined as Error | undefined };
  let verified = 0;
  let rechecked = 0;
  // As the Basic and Bearer authenticators recheck: the credential version, or the token (a 401 ends it, a store error does not).
  const checks: TunnelChecks = {
    onRevoked: (l) => (listeners.add(l), () => listeners.delete(l)),
    recheck: async (owner) => {
      rechecked++;
      if (owner.via === 'basic') return state.versions.get(owner.user) === owner.proof ? undefined : 'credentials changed';
      verified++;
      const err = state.tokenError;
      return err instanceof HttpProblem && err.status === 401 ? err.code : undefined;
    },
  };
  const clock = new ManualClock();
  const tunnels = new Tunnels(checks, silentLogger, clock, false, recheckMs);
  /** An access token's exp (seconds) `s` seconds from the harness's clock. */
  const expIn = (s: number) => clock.now() / 1000 + s;
  return { tunnels, clock, expIn, state, revoke: (sid: string) => listeners.forEach((l) => l(sid)), listeners, verified: () => verified, rechecked: () => rechecked };
}

let stop: (() => void) | undefined;
afterEach(() => stop?.());

describe('Tunnels', () => {
  it('ends a revoked session\'s tunnels at once, both sides, and no other', async () => {
    const h = harness(60_000);
    stop = () => h.tunnels.stop();
    const [a1, a2, b1, b2] = [socket(), socket(), socket(), socket()];
    h.tunnels.add(a1, a2, bearer('s1', h.expIn(60)), { requestId: 'r1', path: '/p', upstream: 'up' });
    h.tunnels.add(b1, b2, bearer('s2', h.expIn(60)), { requestId: 'r2', path: '/p', upstream: 'up' });
    h.revoke('s1');
    await Promise.all([closed(a1), closed(a2)]);
    expect(b1.destroyed || b2.destroyed).toBe(false);
    expect(h.tunnels.size).toBe(1);
  });

  it('a tunnel opened just after its session\'s revocation was heard ends at once, without verifying the token again', async () => {
    const h = harness(60_000);
    stop = () => h.tunnels.stop();
    h.revoke('s-late');
    const [c, u] = [socket(), socket()];
    h.tunnels.add(c, u, bearer('s-late', h.expIn(60)), { requestId: 'r', path: '/p', upstream: 'up' });
    await Promise.all([closed(c), closed(u)]);
    const [c2, u2] = [socket(), socket()];
    h.tunnels.add(c2, u2, bearer('s-fine', h.expIn(60)), { requestId: 'r2', path: '/p', upstream: 'up' });
    // A revoked session's tunnel is ended within add() itself: this one was not.
    expect(c2.destroyed).toBe(false);
    expect(h.verified()).toBe(0);
  });

  it('ends a bearer tunnel at its exp, as the clock it is given reads it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const h = harness(60_000);
      stop = () => h.tunnels.stop();
      const [c, u] = [socket(), socket()];
      h.tunnels.add(c, u, bearer('s', h.expIn(600)), { requestId: 'r', path: '/p', upstream: 'up' });
      vi.advanceTimersByTime(599_999);
      expect(c.destroyed).toBe(false);
      vi.advanceTimersByTime(1);
      expect(c.destroyed && u.destroyed).toBe(true);
      // One whose exp the clock has passed ends on the next turn.
      const [c2, u2] = [socket(), socket()];
      h.clock.advance(601_000);
      h.tunnels.add(c2, u2, bearer('s2', h.expIn(-1)), { requestId: 'r2', path: '/p', upstream: 'up' });
      expect(c2.destroyed).toBe(false);
      vi.advanceTimersByTime(0);
      expect(c2.destroyed).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('the recheck ends a tunnel whose token is now refused (401), not one whose store is down', async () => {
    const h = harness();
    stop = () => h.tunnels.stop();
    const [c, u] = [socket(), socket()];
    h.tunnels.add(c, u, bearer('s', h.expIn(60)), { requestId: 'r', path: '/p', upstream: 'up' });
    h.state.tokenError = new StoreUnavailableError();
    const before = h.verified();
    await vi.waitFor(() => expect(h.verified()).toBeGreaterThan(before + 1));
    expect(c.destroyed).toBe(false);
    h.state.tokenError = new HttpProblem(401, 'invalid_token', 'revoked');
    await closed(c);
  });

  it('the recheck ends a Basic tunnel when the user\'s credentials change or the user is removed', async () => {
    const h = harness();
    stop = () => h.tunnels.stop();
    const [c, u] = [socket(), socket()];
    h.tunnels.add(c, u, basic('alice'), { requestId: 'r', path: '/p', upstream: 'up' });
    await vi.waitFor(() => expect(h.rechecked()).toBeGreaterThan(1));
    expect(c.destroyed).toBe(false);
    h.state.versions.delete('alice');
    await closed(c);
  });

  it('one side closing ends the other; drain waits for open tunnels up to the grace, then ends them', async () => {
    const h = harness(60_000);
    stop = () => h.tunnels.stop();
    const [c, u] = [socket(), socket()];
    h.tunnels.add(c, u, basic('alice'), { requestId: 'r', path: '/p', upstream: 'up' });
    c.destroy();
    await closed(u);
    expect(h.tunnels.size).toBe(0);

    const [c2, u2] = [socket(), socket()];
    h.tunnels.add(c2, u2, basic('alice'), { requestId: 'r', path: '/p', upstream: 'up' });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let drained = false;
    try {
      const draining = h.tunnels.drain(100).then(() => (drained = true));
      await vi.advanceTimersByTimeAsync(99);
      expect(drained || c2.destroyed).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await draining;
    } finally {
      vi.useRealTimers();
    }
    expect(c2.destroyed && u2.destroyed).toBe(true);
    h.tunnels.stop();
    expect(h.listeners.size).toBe(0);
  });

  it('a tunnel that ended holds no timer: the side that stayed closes and takes its grace timer with it', async () => {
    const h = harness(60_000);
    stop = () => h.tunnels.stop();
    const pairs = Array.from({ length: 20 }, () => [socket(), socket()] as const);
    for (const [c, u] of pairs) h.tunnels.add(c, u, basic('alice'), { requestId: 'r', path: '/p', upstream: 'up' });
    const made: unknown[] = [];
    const cleared = new Set<unknown>();
    const set = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms?: number) => {
      const timer = realSetTimeout(fn, ms);
      made.push(timer);
      return timer;
    }) as typeof setTimeout);
    const clear = vi.spyOn(globalThis, 'clearTimeout').mockImplementation(((timer?: NodeJS.Timeout) => {
      cleared.add(timer);
      realClearTimeout(timer);
    }) as typeof clearTimeout);
    try {
      for (const [c] of pairs) c.destroy();
      await Promise.all(pairs.map(([, u]) => closed(u)));
    } finally {
      set.mockRestore();
      clear.mockRestore();
    }
    expect(h.tunnels.size).toBe(0);
    // Left to run, each grace timer would hold both sockets, and all they reach, for a second.
    expect(made.length).toBeGreaterThan(0);
    expect(made.filter((t) => !cleared.has(t))).toEqual([]);

    // A side that never closes is destroyed when its grace is over.
    const stuck = new Duplex({ read() {}, write(_c, _e, cb) { cb(); } });
    const c = socket();
    h.tunnels.add(c, stuck, basic('alice'), { requestId: 'r', path: '/p', upstream: 'up' });
    c.destroy();
    await closed(stuck);
  });

  it('admits up to max tunnels open or opening per upstream; an ended tunnel or a settled handshake frees its place', async () => {
    const h = harness(60_000);
    stop = () => h.tunnels.stop();
    const alice = basic('alice');
    expect(h.tunnels.admit('up', 2)).toBe(true);
    const [c, u] = [socket(), socket()];
    // Opened: counted open before its handshake settles, so the count never dips between the two.
    h.tunnels.add(c, u, alice, { requestId: 'r1', path: '/p', upstream: 'up' });
    h.tunnels.settled('up');
    expect(h.tunnels.admit('up', 2)).toBe(true);
    expect(h.tunnels.admit('up', 2)).toBe(false);
    expect(h.tunnels.admit('other', 2)).toBe(true);
    // The opening one is answered without a tunnel: its place is free.
    h.tunnels.settled('up');
    expect(h.tunnels.admit('up', 2)).toBe(true);
    h.tunnels.settled('up');
    // The open one ends: its place is free as well (both free now).
    c.destroy();
    await closed(u);
    expect(h.tunnels.admit('up', 2) && h.tunnels.admit('up', 2)).toBe(true);
    expect(h.tunnels.admit('up', 2)).toBe(false);
  });
});
