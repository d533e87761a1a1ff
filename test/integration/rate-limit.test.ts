import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, gatewayFixture, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';

const f = gatewayFixture({ users: { alice: 'alice-pw', bob: 'bob-pw' }, redis: true, gateway: false });
let a: RunningGateway;
let b: RunningGateway;

beforeAll(async () => {
  const config = () => testConfig(f.users.file, {
    store: { kind: 'redis', url: f.redis.url, commandTimeoutMs: 300 },
    rateLimit: { requests: 4, windowSeconds: 60 },
    upstreams: { up: { url: f.echo.url } },
    routes: [
      { path: '/v1/conversations', upstream: 'up' },
      { path: '/v1/contacts', upstream: 'up', rateLimit: { requests: 1, windowSeconds: 60 } },
      { path: '/v1/unlimited', upstream: 'up', rateLimit: false },
    ],
  });
  a = await startGateway(config());
  b = await startGateway(config());
});
afterAll(async () => {
  await a.close();
  await b.close();
});

const get = (gw: RunningGateway, path: string, user = 'alice') =>
  fetch(`${gw.base}${path}`, { headers: { authorization: basic(user, `${user}-pw`) } });

describe('rate limiting per principal', () => {
  it('shares one limit across instances on one Redis, with RateLimit headers and a 429 past it', async () => {
    const statuses = [];
    const remaining = [];
    for (const gw of [a, b, a, b]) {
      const res = await get(gw, '/v1/conversations');
      statuses.push(res.status);
      remaining.push(res.headers.get('ratelimit-remaining'));
      expect(res.headers.get('ratelimit-limit')).toBe('4');
    }
    expect(statuses).toEqual([200, 200, 200, 200]);
    expect(remaining).toEqual(['3', '2', '1', '0']);
    const refused = await get(b, '/v1/conversations');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toMatchObject({ code: 'rate_limited', status: 429 });
    // Another principal has a bucket of its own.
    expect((await get(a, '/v1/conversations', 'bob')).status).toBe(200);
  });

  it('applies a route limit over the global one, and none where the route says false', async () => {
    expect((await get(a, '/v1/contacts', 'bob')).status).toBe(200);
    expect((await get(b, '/v1/contacts', 'bob')).status).toBe(429);
    for (let i = 0; i < 6; i++) {
      const res = await get(a, '/v1/unlimited');
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBeNull();
    }
  });

  it('fails open while Redis is down for Basic users with cached credentials', async () => {
    // bob's password is cached from the requests above; the limit counter cannot be read.
    await f.redis.stop();
    try {
      const res = await get(a, '/v1/unlimited', 'bob');
      expect(res.status).toBe(200);
      const limited = await get(a, '/v1/conversations', 'bob');
      expect(limited.status).toBe(200);
    } finally {
      await f.redis.start();
    }
  });
});
