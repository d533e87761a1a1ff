import { describe, expect, it } from 'vitest';
import { createTokens, gatewayFixture, postJson, startGateway, testConfig } from '../support/fixtures.js';
import { waitForHttp } from '../support/process.js';

const gw = gatewayFixture({
  redis: true,
  config: (f) => ({
    store: { kind: 'redis', url: f.redis.url, commandTimeoutMs: 300 },
    upstreams: { up: { url: f.echo.url } },
    routes: [{ path: '/v1/conversations', upstream: 'up', paging: { sortable: ['campaignId'] } }],
  }),
});

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

describe('tokens on the redis store', () => {
  it('answers 20 concurrent refreshes with one token (tabs, retries) with one successor: one live chain', async () => {
    const pair = await createTokens(gw.base, 'alice', 'alice-pw');
    const results = await Promise.all(
      Array.from({ length: 20 }, () => postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    const pairs = (await Promise.all(results.map((r) => r.json()))) as Array<typeof pair>;
    expect(new Set(pairs.map((p) => p.refreshToken)).size).toBe(1);
    for (const p of pairs) expect((await fetch(`${gw.base}/v1/conversations`, bearer(p.accessToken))).status).toBe(200);
    expect((await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pairs[0]!.refreshToken })).status).toBe(200);
  });

  it('revokes on one instance and refuses the token on another instance at once', async () => {
    const other = await startGateway(testConfig(gw.users.file, {
      store: { kind: 'redis', url: gw.redis.url },
      upstreams: { up: { url: gw.echo.url } },
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
    await gw.redis.stop();
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
      await gw.redis.start();
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
  it('within refreshReuseGraceSeconds answers a just-rotated token with its successor; with 0, it is reuse', async () => {
    const graceful = await startGateway(testConfig(gw.users.file, {
      store: { kind: 'redis', url: gw.redis.url },
      tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) }, refreshReuseGraceSeconds: 30 },
    }));
    try {
      await waitForHttp(`${graceful.base}/readyz`);
      const first = await createTokens(graceful.base, 'alice', 'alice-pw');
      const second = (await (await postJson(graceful.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).json()) as typeof first;
      const again = await postJson(graceful.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken });
      expect(again.status).toBe(200);
      expect(((await again.json()) as typeof first).refreshToken).toBe(second.refreshToken);
      expect((await postJson(graceful.base, '/v1/tokens/refresh', { refreshToken: second.refreshToken })).status).toBe(200);
    } finally {
      await graceful.close();
    }
    const strict = await startGateway(testConfig(gw.users.file, {
      store: { kind: 'redis', url: gw.redis.url },
      tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) }, refreshReuseGraceSeconds: 0 },
    }));
    try {
      // As for the one above: the first create waits for the store's connection, not the gateway's start.
      await waitForHttp(`${strict.base}/readyz`);
      const first = await createTokens(strict.base, 'alice', 'alice-pw');
      const second = (await (await postJson(strict.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).json()) as typeof first;
      expect((await postJson(strict.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).status).toBe(401);
      expect((await postJson(strict.base, '/v1/tokens/refresh', { refreshToken: second.refreshToken })).status).toBe(401);
    } finally {
      await strict.close();
    }
  });
});
