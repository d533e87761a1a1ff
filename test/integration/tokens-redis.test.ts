import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokens, echoUpstream, htpasswd, postJson, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { waitForHttp } from '../support/process.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

let users: Users;
let redis: TestRedis;
let echo: EchoUpstream;
let gw: RunningGateway;

beforeAll(async () => {
  users = htpasswd({ alice: 'alice-pw' });
  redis = await startRedis();
  echo = await echoUpstream();
  gw = await startGateway(testConfig(users.file, {
    store: { kind: 'redis', url: redis.url, commandTimeoutMs: 300 },
    upstreams: { up: { url: echo.url } },
    routes: [{ path: '/v1/conversations', upstream: 'up', paging: { sortable: ['campaignId'] } }],
  }));
});
afterAll(async () => {
  await gw.close();
  await echo.close();
  await redis.destroy();
  users.remove();
});

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

describe('tokens on the redis store', () => {
  it('lets exactly one of 20 concurrent refreshes with one token succeed', async () => {
    const pair = await createTokens(gw.base, 'alice', 'alice-pw');
    const results = await Promise.all(
      Array.from({ length: 20 }, () => postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken })),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 401)).toHaveLength(19);
  });

  it('revokes on one instance and refuses the token on another instance at once', async () => {
    const other = await startGateway(testConfig(users.file, {
      store: { kind: 'redis', url: redis.url },
      upstreams: { up: { url: echo.url } },
      routes: [{ path: '/v1/conversations', upstream: 'up' }],
    }));
    try {
      const pair = await createTokens(gw.base, 'alice', 'alice-pw');
      expect((await fetch(`${other.base}/v1/conversations`, bearer(pair.accessToken))).status).toBe(200);
      expect((await postJson(gw.base, '/v1/tokens/revoke', { token: pair.accessToken, type: 'ACCESS_TOKEN' })).status).toBe(200);
      expect((await fetch(`${other.base}/v1/conversations`, bearer(pair.accessToken))).status).toBe(401);
    } finally {
      await other.close();
    }
  });

  it('answers 503 within about a second while Redis is down, stays up, and recovers by itself', async () => {
    const pair = await createTokens(gw.base, 'alice', 'alice-pw');
    await redis.stop();
    try {
      for (const attempt of [
        () => fetch(`${gw.base}/v1/conversations`, bearer(pair.accessToken)),
        () => postJson(gw.base, '/v1/tokens/create', { appKey: 'alice', appSecret: 'alice-pw' }),
        () => postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken }),
        () => fetch(`${gw.base}/readyz`),
      ]) {
        const started = Date.now();
        const res = await attempt();
        expect(Date.now() - started).toBeLessThan(1500);
        // Fail closed, and never 401: a 401 would send every client into a refresh storm.
        expect(res.status).toBe(503);
        expect(res.headers.get('content-type')).toMatch(/problem\+json/);
        expect(((await res.json()) as { code: string }).code).toMatch(/store_unavailable|service_unavailable/);
      }
      expect((await fetch(`${gw.base}/healthz`)).status).toBe(200);
    } finally {
      await redis.start();
    }
    const restarted = Date.now();
    let status = 0;
    while (Date.now() - restarted < 3000) {
      status = (await fetch(`${gw.base}/v1/conversations`, bearer(pair.accessToken))).status;
      if (status !== 503) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(Date.now() - restarted).toBeLessThan(2000);
    // This Redis keeps nothing on disk: the session is gone, so the token is refused, but Redis answers again.
    expect(status).toBe(401);
    expect((await fetch(`${gw.base}/readyz`)).status).toBe(200);
    const fresh = await createTokens(gw.base, 'alice', 'alice-pw');
    expect((await fetch(`${gw.base}/v1/conversations`, bearer(fresh.accessToken))).status).toBe(200);
  });
});

describe('refresh reuse grace', () => {
  it('within refreshReuseGraceSeconds refuses a just-rotated token with 401 but keeps the session', async () => {
    const graceful = await startGateway(testConfig(users.file, {
      store: { kind: 'redis', url: redis.url },
      tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) }, refreshReuseGraceSeconds: 30 },
    }));
    try {
      await waitForHttp(`${graceful.base}/readyz`);
      const first = await createTokens(graceful.base, 'alice', 'alice-pw');
      const second = (await (await postJson(graceful.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).json()) as typeof first;
      expect((await postJson(graceful.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).status).toBe(401);
      expect((await postJson(graceful.base, '/v1/tokens/refresh', { refreshToken: second.refreshToken })).status).toBe(200);
    } finally {
      await graceful.close();
    }
  });
});
