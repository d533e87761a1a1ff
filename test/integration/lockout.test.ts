import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { MemoryTokenStore } from '../../src/tokens/store/memory.js';
import { basic, echoUpstream, htpasswd, postJson, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';

let users: Users;
let echo: EchoUpstream;
let clock: ManualClock;
let store: MemoryTokenStore;
let gw: RunningGateway;

beforeAll(async () => {
  users = htpasswd({ alice: 'alice-pw', bob: 'bob-pw', carol: 'carol-pw' });
  echo = await echoUpstream();
});
afterAll(async () => {
  await echo.close();
  users.remove();
});

async function start(lockout: Record<string, number>, server: Record<string, unknown> = {}) {
  clock = new ManualClock(Date.now());
  store = new MemoryTokenStore(clock);
  gw = await startGateway(testConfig(users.file, {
    server: { host: '127.0.0.1', port: 0, ...server },
    lockout,
    upstreams: { up: { url: echo.url } },
    routes: [{ path: '/v1/conversations', upstream: 'up' }],
  }), { clock, store });
}
afterEach(async () => {
  await gw.close();
  await store.close();
});

const create = (appKey: string, appSecret: string, headers: Record<string, string> = {}) =>
  postJson(gw.base, '/v1/tokens/create', { appKey, appSecret }, headers);

describe('lockout of failed password checks', () => {
  it('answers 429 with Retry-After past the per-user limit, even with the right password, until the window passes', async () => {
    await start({ maxFailuresPerUser: 3, maxFailuresPerAddress: 100, windowSeconds: 60 });
    for (let i = 0; i < 3; i++) expect((await create('alice', 'wrong')).status).toBe(401);
    const locked = await create('alice', 'alice-pw');
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(locked.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(await locked.json()).toMatchObject({ code: 'too_many_attempts', status: 429 });
    // Another user from the same address is not affected by alice's counter.
    expect((await create('bob', 'bob-pw')).status).toBe(200);
    clock.advance(61_000);
    expect((await create('alice', 'alice-pw')).status).toBe(200);
  });

  it('cannot be outrun by concurrent guesses at one user', async () => {
    await start({ maxFailuresPerUser: 5, maxFailuresPerAddress: 100, windowSeconds: 60 });
    const statuses = (await Promise.all(Array.from({ length: 30 }, (_, i) => create('alice', `guess-${i}`)))).map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(25);
  });

  it('lets concurrent sign-ins of many users from one address through (no false lockout)', async () => {
    await start({ maxFailuresPerUser: 2, maxFailuresPerAddress: 2, windowSeconds: 60 });
    const statuses = (await Promise.all([
      ...Array.from({ length: 10 }, () => create('alice', 'alice-pw')),
      ...Array.from({ length: 10 }, () => create('bob', 'bob-pw')),
    ])).map((r) => r.status);
    expect(statuses.every((s) => s === 200)).toBe(true);
  });

  it('counts per client address across user names', async () => {
    await start({ maxFailuresPerUser: 100, maxFailuresPerAddress: 3, windowSeconds: 60 });
    for (const user of ['x1', 'x2', 'x3']) expect((await create(user, 'wrong')).status).toBe(401);
    expect((await create('carol', 'carol-pw')).status).toBe(429);
  });

  it('counts failed Basic attempts toward the same lockout', async () => {
    await start({ maxFailuresPerUser: 2, maxFailuresPerAddress: 100, windowSeconds: 60 });
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${gw.base}/v1/conversations`, { headers: { authorization: basic('bob', 'wrong') } });
      expect(res.status).toBe(401);
    }
    expect((await fetch(`${gw.base}/v1/conversations`, { headers: { authorization: basic('bob', 'bob-pw') } })).status).toBe(429);
    expect((await create('bob', 'bob-pw')).status).toBe(429);
  });

  it('keys the address on the peer, not on a client-sent X-Forwarded-For, unless trustProxy says so', async () => {
    await start({ maxFailuresPerUser: 100, maxFailuresPerAddress: 2, windowSeconds: 60 });
    for (let i = 0; i < 2; i++) expect((await create(`u${i}`, 'wrong', { 'x-forwarded-for': `10.0.0.${i}` })).status).toBe(401);
    expect((await create('carol', 'carol-pw', { 'x-forwarded-for': '10.0.0.99' })).status).toBe(429);
  });

  it('with trustProxy 1 keys the address on the entry the trusted proxy added (the rightmost)', async () => {
    await start({ maxFailuresPerUser: 100, maxFailuresPerAddress: 2, windowSeconds: 60 }, { trustProxy: 1 });
    // A client spoofing the leftmost entry cannot escape its counter: the proxy appends the real address.
    for (let i = 0; i < 2; i++) expect((await create(`u${i}`, 'wrong', { 'x-forwarded-for': `1.1.1.${i}, 203.0.113.7` })).status).toBe(401);
    expect((await create('carol', 'carol-pw', { 'x-forwarded-for': '9.9.9.9, 203.0.113.7' })).status).toBe(429);
    expect((await create('carol', 'carol-pw', { 'x-forwarded-for': '203.0.113.8' })).status).toBe(200);
  });
});
