import { Redis } from 'ioredis';
import { sessionPlace } from '../../src/stores/sessions/user-index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisSessionStore } from '../../src/stores/sessions/redis-session-store.js';
import { createTokens, gatewayFixture, postJson, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';
import { waitUntil } from '../support/poll.js';

const f = gatewayFixture({ redis: true, gateway: false });
let a: RunningGateway;
let b: RunningGateway;
let raw: Redis;

const config = () => testConfig(f.users.file, {
  store: { kind: 'redis', url: f.redis.url, livenessCacheMs: 10_000 },
  upstreams: { up: { url: f.echo.url } },
  routes: [{ path: '/v1/conversations', upstream: 'up' }],
});

beforeAll(async () => {
  a = await startGateway(config());
  b = await startGateway(config());
  raw = new Redis(f.redis.url);
  await waitUntil(() => storeOf(a).liveness.enabled && storeOf(b).liveness.enabled, 3000, 2);
});
afterAll(async () => {
  raw.disconnect();
  await a.close();
  await b.close();
});

const storeOf = (gw: RunningGateway) => gw.gateway.store as unknown as RedisSessionStore;
const list = (gw: RunningGateway, token: string) => fetch(`${gw.base}/v1/conversations`, { headers: { authorization: `Bearer ${token}` } });


/** B has answered from Redis once, so the session is in its liveness cache. */
async function warm(token: string): Promise<void> {
  expect((await list(b, token)).status).toBe(200);
  expect((await list(b, token)).status).toBe(200);
}

describe('the session liveness cache', () => {
  it.each([
    ['revoke with the access token', async (t: { accessToken: string; refreshToken: string }) =>
      postJson(a.base, '/v1/tokens/revoke', { token: t.accessToken, type: 'ACCESS_TOKEN' })],
    ['revoke with the refresh token', async (t: { accessToken: string; refreshToken: string }) =>
      postJson(a.base, '/v1/tokens/revoke', { token: t.refreshToken, type: 'REFRESH_TOKEN' })],
    // Its successor used: reuse within the grace period as well (a retry would get the successor).
    ['reuse of a rotated-away refresh token', async (t: { accessToken: string; refreshToken: string }) => {
      const first = await postJson(a.base, '/v1/tokens/refresh', { refreshToken: t.refreshToken });
      expect(first.status).toBe(200);
      const { refreshToken } = (await first.json()) as { refreshToken: string };
      expect((await postJson(a.base, '/v1/tokens/refresh', { refreshToken })).status).toBe(200);
      return postJson(a.base, '/v1/tokens/refresh', { refreshToken: t.refreshToken });
    }],
  ])('lets %s on one instance take effect on another within 50 ms', async (_name, revoke) => {
    const tokens = await createTokens(a.base, 'alice', 'alice-pw');
    await warm(tokens.accessToken);
    await revoke(tokens);
    const elapsed = await waitUntil(async () => (await list(b, tokens.accessToken)).status === 401, 1000, 2);
    expect(elapsed).toBeLessThan(50);
  });

  it('is really used, and is emptied and bypassed when the invalidation channel goes down', async () => {
    const tokens = await createTokens(a.base, 'alice', 'alice-pw');
    await warm(tokens.accessToken);
    const sid = tokens.refreshToken.split('.')[0]!;
    // Deleted behind the gateway's back (no publish): B still answers from its cache.
    const place = sessionPlace(sid)!;
    await raw.hdel(`gw:${place.key}`, place.field);
    expect((await list(b, tokens.accessToken)).status).toBe(200);
    // Cut the subscribers: the cache must not be trusted, so B asks Redis and refuses the token.
    await raw.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await waitUntil(async () => (await list(b, tokens.accessToken)).status === 401, 1000, 2);
    // The channel comes back by itself and the cache with it.
    await waitUntil(() => storeOf(b).liveness.enabled, 3000, 20);
  });

  it('never answers from the cache while Redis is down', async () => {
    const tokens = await createTokens(a.base, 'alice', 'alice-pw');
    await warm(tokens.accessToken);
    await f.redis.stop();
    try {
      expect((await list(b, tokens.accessToken)).status).toBe(503);
    } finally {
      await f.redis.start();
    }
    await waitUntil(async () => (await list(b, tokens.accessToken)).status !== 503, 3000, 50);
  });
});
