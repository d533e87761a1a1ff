import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/log.js';
import { MemoryCounters } from '../../src/stores/counters/memory-counters.js';
import type { RedisCounters } from '../../src/stores/counters/redis-counters.js';
import { PAIR_RECHECK_MS } from '../../src/credentials/lockout.js';
import { MemorySessionStore } from '../../src/stores/sessions/memory-session-store.js';
import { basic, gatewayFixture, postJson, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';

// The brute-force policy from the outside: each outcome the policy promises is one test. Time is the
// gateway's injected clock (the memory store reads it too), so windows and refills are exact.

const f = gatewayFixture({ users: { alice: 'alice-pw', bob: 'bob-pw', carol: 'carol-pw' }, gateway: false });
let clock: ManualClock;
let store: MemorySessionStore;
let counters: MemoryCounters;
let gw: RunningGateway;
let logLines: string[];
let lockoutConfig: Record<string, number>;

/** Defaults of the shipped policy unless overridden; trustProxy 1 so a test can speak from any address. */
async function start(lockout: Record<string, number> = {}) {
  clock = new ManualClock(Date.now());
  store = new MemorySessionStore(clock);
  counters = new MemoryCounters(clock);
  logLines = [];
  lockoutConfig = lockout;
  gw = await startInstance();
}

/** A gateway on the test's clock, store and counters: another instance of the same deployment. */
function startInstance(): Promise<RunningGateway> {
  return startGateway(testConfig(f.users.file, {
    server: { host: '127.0.0.1', port: 0, trustProxy: 1 },
    lockout: lockoutConfig,
    upstreams: { up: { url: f.echo.url } },
    routes: [{ path: '/v1/conversations', upstream: 'up' }],
  }), { clock, store, counters, log: createLogger('debug', (line) => logLines.push(line)) });
}

const from = (address: string) => ({ 'x-forwarded-for': address });
const create = (appKey: string, appSecret: string, address = '203.0.113.1') =>
  postJson(gw.base, '/v1/tokens/create', { appKey, appSecret }, from(address));
const list = (user: string, password: string, address = '203.0.113.1', on = gw) =>
  fetch(`${on.base}/v1/conversations`, { headers: { authorization: basic(user, password), ...from(address) } });
const retryAfter = (res: Response) => Number(res.headers.get('retry-after'));
const decisions = () => logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === 'lockout' || l.event === 'throttle');

/** Signs in, waiting out each Retry-After (on the injected clock); the total wait in seconds. */
async function signInWaiting(user: string, password: string, address: string): Promise<{ status: number; waitedSeconds: number }> {
  let waited = 0;
  for (let i = 0; i < 10; i++) {
    const res = await create(user, password, address);
    if (res.status !== 429) return { status: res.status, waitedSeconds: waited };
    waited += retryAfter(res);
    clock.advance(retryAfter(res) * 1000);
  }
  return { status: 429, waitedSeconds: waited };
}

describe('brute-force policy', () => {
  afterEach(async () => {
    await gw.close();
    await store.close();
    await counters.close();
  });

  it('failures against other and unknown user names from an address hold a real user\'s correct password back for at most a few seconds', async () => {
    await start();
    // As a new user would try it: ten made-up user names, then the real ones, from one address.
    for (let i = 1; i <= 10; i++) expect((await create(`mallory${i}`, 'guess', '198.51.100.7')).status).toBe(401);
    // Real user names, wrong passwords: the address is slowed down, not its users locked out.
    expect((await create('bob', 'wrong', '198.51.100.7')).status).toBe(429);
    const carol = await signInWaiting('carol', 'carol-pw', '198.51.100.7');
    expect(carol.status).toBe(200);
    expect(carol.waitedSeconds).toBeLessThanOrEqual(2);
    // Basic from the same address alike.
    clock.advance(2000);
    expect((await list('alice', 'alice-pw', '198.51.100.7')).status).toBe(200);
    // Another address was never affected.
    expect((await create('bob', 'bob-pw', '198.51.100.8')).status).toBe(200);
  });

  it('guessing one user from one address is stopped after maxFailuresPerUser; the same user from another address still gets in', async () => {
    await start({ maxFailuresPerUser: 3 });
    for (let i = 0; i < 3; i++) expect((await create('alice', `guess-${i}`, '198.51.100.7')).status).toBe(401);
    const locked = await create('alice', 'alice-pw', '198.51.100.7');
    expect(locked.status).toBe(429);
    expect(await locked.json()).toMatchObject({ code: 'too_many_attempts', status: 429 });
    expect(retryAfter(locked)).toBeGreaterThan(800);
    expect(retryAfter(locked)).toBeLessThanOrEqual(900);
    expect((await create('alice', 'alice-pw', '192.0.2.44')).status).toBe(200);
    expect((await list('alice', 'alice-pw', '192.0.2.44')).status).toBe(200);
    // Other users from the guessing address are not locked either.
    expect((await create('bob', 'bob-pw', '198.51.100.7')).status).toBe(200);
    // The window passes: the pair may try again.
    clock.advance(901_000);
    expect((await create('alice', 'alice-pw', '198.51.100.7')).status).toBe(200);
  });

  it('a password verified moments ago is refused too once its user is locked from that address, by Basic as by create, with the lock\'s remaining time', async () => {
    await start({ maxFailuresPerUser: 3 });
    // alice's client signs in with Basic: its password is proven (cached).
    expect((await list('alice', 'alice-pw', '198.51.100.7')).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await create('alice', `guess-${i}`, '198.51.100.7')).status).toBe(401);
    const basicLocked = await list('alice', 'alice-pw', '198.51.100.7');
    expect(basicLocked.status).toBe(429);
    expect(await basicLocked.json()).toMatchObject({ code: 'too_many_attempts', detail: expect.stringMatching(/from this address/) });
    expect(retryAfter(basicLocked)).toBeGreaterThan(800);
    expect(retryAfter(basicLocked)).toBeLessThanOrEqual(900);
    const createLocked = await create('alice', 'alice-pw', '198.51.100.7');
    expect(createLocked.status).toBe(429);
    expect(retryAfter(createLocked)).toBe(retryAfter(basicLocked));
    // The same user from another address is not locked, cached or not.
    expect((await list('alice', 'alice-pw', '192.0.2.44')).status).toBe(200);
    // An operator lifts it: the cached password gets in again from that address.
    await gw.gateway.lockout.clear({ user: 'alice' });
    expect((await list('alice', 'alice-pw', '198.51.100.7')).status).toBe(200);
  });

  it('a user+address lock counted by another instance holds a cached Basic password back within PAIR_RECHECK_MS', async () => {
    await start({ maxFailuresPerUser: 3 });
    const other = await startInstance();
    try {
      expect((await list('alice', 'alice-pw', '198.51.100.7')).status).toBe(200);
      for (let i = 0; i < 3; i++) {
        const res = await postJson(other.base, '/v1/tokens/create', { appKey: 'alice', appSecret: `guess-${i}` }, from('198.51.100.7'));
        expect(res.status).toBe(401);
      }
      clock.advance(PAIR_RECHECK_MS);
      const locked = await list('alice', 'alice-pw', '198.51.100.7');
      expect(locked.status).toBe(429);
      expect(retryAfter(locked)).toBeGreaterThan(800);
      // Every request of the locked pair reads the store again, so an operator's clear holds at once.
      await other.gateway.lockout.clear({ user: 'alice' });
      expect((await list('alice', 'alice-pw', '198.51.100.7')).status).toBe(200);
    } finally {
      await other.close();
    }
  });

  it('the first 429 of a user+address lock gives the lock\'s remaining time, also when the address is slowed down at the same moment', async () => {
    await start({ maxFailuresPerUser: 3, addressBurst: 3 });
    for (let i = 0; i < 3; i++) expect((await create('alice', `guess-${i}`, '198.51.100.7')).status).toBe(401);
    const basicLocked = await list('alice', 'alice-pw', '198.51.100.7');
    expect(basicLocked.status).toBe(429);
    expect(retryAfter(basicLocked)).toBeGreaterThan(800);
    const createLocked = await create('alice', 'alice-pw', '198.51.100.7');
    expect(createLocked.status).toBe(429);
    expect(await createLocked.json()).toMatchObject({ detail: expect.stringMatching(/for this user from this address/) });
    expect(retryAfter(createLocked)).toBeGreaterThan(800);
  });

  it('guessing one user from many addresses stops at maxFailuresPerAccount consecutive failures; recently verified clients keep working; an operator can lift it', async () => {
    await start({ maxFailuresPerAccount: 5 });
    // alice's own client signs in with Basic before the attack: its password is proven (cached).
    expect((await list('alice', 'alice-pw', '192.0.2.1')).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await create('alice', 'guess', `198.51.100.${i}`)).status).toBe(401);
    const locked = await create('alice', 'alice-pw', '198.51.100.99');
    expect(locked.status).toBe(429);
    expect(await locked.json()).toMatchObject({ code: 'too_many_attempts', detail: expect.stringMatching(/for this user;/) });
    // The running client is not cut off: its password was verified moments ago.
    expect((await list('alice', 'alice-pw', '192.0.2.1')).status).toBe(200);
    // bob is another account.
    expect((await create('bob', 'bob-pw', '198.51.100.99')).status).toBe(200);
    // `auth-gateway lockout clear --user alice` does this.
    await gw.gateway.lockout.clear({ user: 'alice' });
    expect((await create('alice', 'alice-pw', '198.51.100.99')).status).toBe(200);
  });

  it('counts consecutive failures: a correct password starts the account count again', async () => {
    await start({ maxFailuresPerAccount: 5 });
    for (let i = 0; i < 4; i++) expect((await create('alice', 'guess', `198.51.100.${i}`)).status).toBe(401);
    expect((await create('alice', 'alice-pw', '192.0.2.9')).status).toBe(200);
    for (let i = 4; i < 8; i++) expect((await create('alice', 'guess', `198.51.100.${i}`)).status).toBe(401);
    // Only 4 consecutive: not locked. (The password is cached now, so use create, which always checks.)
    expect((await create('alice', 'alice-pw', '192.0.2.9')).status).toBe(200);
  });

  it('bounds the guesses one address gets judged in a minute: burst + rate, however fast and however concurrent it sends', async () => {
    await start({ addressBurst: 10, addressFailuresPerMinute: 30 });
    let judged = 0;
    let refused = 0;
    // 60 s of 20 concurrent guesses every 250 ms (4,800 attempts), each at a new user name.
    for (let tick = 0; tick < 240; tick++) {
      const statuses = await Promise.all(Array.from({ length: 20 }, (_, i) => create(`spray-${tick}-${i}`, 'guess', '198.51.100.7').then((r) => r.status)));
      judged += statuses.filter((s) => s === 401).length;
      refused += statuses.filter((s) => s === 429).length;
      clock.advance(250);
    }
    expect(judged + refused).toBe(4800);
    // 10 at once, then one every 2 s: 10 + 30 in the minute (one more for a refill landing on the edge).
    expect(judged, `judged ${judged} of 4800 guesses in 60 s`).toBeGreaterThanOrEqual(38);
    expect(judged, `judged ${judged} of 4800 guesses in 60 s`).toBeLessThanOrEqual(41);
  }, 60_000);

  it('counts failed Basic attempts toward the same policy as token create', async () => {
    await start({ maxFailuresPerUser: 2 });
    for (let i = 0; i < 2; i++) expect((await list('bob', 'wrong', '198.51.100.7')).status).toBe(401);
    expect((await list('bob', 'bob-pw', '198.51.100.7')).status).toBe(429);
    expect((await create('bob', 'bob-pw', '198.51.100.7')).status).toBe(429);
  });

  it('keys the address on the entry the trusted proxy added, never on the client-controlled leftmost one', async () => {
    await start({ maxFailuresPerUser: 2 });
    // A client spoofing the leftmost entry cannot escape its counter: the proxy appends the real address.
    for (let i = 0; i < 2; i++) {
      const res = await postJson(gw.base, '/v1/tokens/create', { appKey: 'carol', appSecret: 'wrong' }, { 'x-forwarded-for': `1.1.1.${i}, 203.0.113.7` });
      expect(res.status).toBe(401);
    }
    expect((await postJson(gw.base, '/v1/tokens/create', { appKey: 'carol', appSecret: 'carol-pw' }, { 'x-forwarded-for': '9.9.9.9, 203.0.113.7' })).status).toBe(429);
    expect((await postJson(gw.base, '/v1/tokens/create', { appKey: 'carol', appSecret: 'carol-pw' }, { 'x-forwarded-for': '203.0.113.8' })).status).toBe(200);
  });

  it('logs each lockout and throttle decision once, with user and address, never the password', async () => {
    await start({ maxFailuresPerUser: 3, addressBurst: 5 });
    for (let i = 0; i < 6; i++) await create('alice', 'Secret-Guess-1', '198.51.100.7');
    for (let i = 0; i < 3; i++) await create(`nobody${i}`, 'Secret-Guess-2', '198.51.100.8');
    await create('nobody9', 'Secret-Guess-2', '198.51.100.8');
    await create('nobody9', 'Secret-Guess-2', '198.51.100.8');
    const lockouts = decisions().filter((d) => d.event === 'lockout');
    expect(lockouts).toEqual([expect.objectContaining({ scope: 'user+address', user: 'alice', address: '198.51.100.7', failures: 3, level: 'warn' })]);
    expect(logLines.join('\n')).not.toContain('Secret-Guess');
    // The address bursts 5, then each further failure (one per refill) is one throttle decision.
    const throttles = decisions().filter((d) => d.event === 'throttle');
    expect(throttles.length).toBeGreaterThanOrEqual(1);
    for (const t of throttles) expect(t).toMatchObject({ scope: 'address', address: expect.stringMatching(/^198\.51\.100\.[78]$/), retryAfterSeconds: expect.any(Number) });
  });
});

describe('identical sign-ins at once (a reconnect storm through one address)', () => {
  // A real bcrypt cost, so the first check is still running when the others arrive.
  const storm = gatewayFixture({
    users: { dana: 'dana-password' },
    cost: 12,
    config: (fx) => ({ upstreams: { up: { url: fx.echo.url } }, routes: [{ path: '/v1/conversations', upstream: 'up' }] }),
  });
  const burst = (password: string) => Promise.all(Array.from({ length: 100 }, () =>
    fetch(`${storm.base}/v1/conversations`, { headers: { authorization: basic('dana', password) } }).then((r) => r.status)));

  it('100 requests with the same Basic credentials from one address, before any is verified, are all judged by one check: all 200, or all 401', async () => {
    const wrong = await burst('not-the-password');
    expect(wrong.filter((s) => s !== 401)).toEqual([]);
    const right = await burst('dana-password');
    expect(right.filter((s) => s !== 200)).toEqual([]);
  });
});

describe('identical sign-ins at once while the store is slow to answer the lock check', () => {
  // A new user per burst: its password is verified by none of the earlier bursts (nothing is cached).
  const users = Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`erin${i}`, `erin-password-${i}`]));
  const slow = gatewayFixture({
    users: { ...users, warm: 'warm-pw' },
    redis: true,
    config: (fx) => ({
      store: { kind: 'redis', url: fx.redis.url, commandTimeoutMs: 3000 },
      upstreams: { up: { url: fx.echo.url } },
      routes: [{ path: '/v1/conversations', upstream: 'up' }],
    }),
  });
  let admin: Redis;
  beforeAll(async () => {
    expect(await (slow.gateway.counters as RedisCounters).waitUntilReady(5000)).toBe(true);
    admin = new Redis(slow.redis.url);
  });
  afterAll(async () => {
    await admin.quit();
  });
  const get = (user: string, password: string) =>
    fetch(`${slow.base}/v1/conversations`, { headers: { authorization: basic(user, password) } }).then(async (r) => {
      await r.arrayBuffer();
      return r.status;
    });

  it('200 requests with one correct, uncached Basic credential from one address all get in, while the lock check waits on the store', async () => {
    expect(await get('warm', 'warm-pw')).toBe(200);
    for (const [user, password] of Object.entries(users)) {
      // Redis answers nothing for a second: the first attempt's lock check waits, and the others arrive meanwhile.
      await admin.call('CLIENT', 'PAUSE', '1000', 'ALL');
      const statuses = await Promise.all(Array.from({ length: 200 }, () => get(user, password)));
      const counts: Record<number, number> = {};
      for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
      expect(counts, `burst of ${user}`).toEqual({ 200: 200 });
    }
  }, 30_000);
});
