import { describe, expect, it } from 'vitest';
import { exchange, handshake, parseAnswer } from '../support/raw-client.js';
import { basic, createTokens, gatewayFixture, postJson } from '../support/fixtures.js';

// =============================================================================================
// Audit (issue 17): who got a token, who failed, from where. Every token call and every 401, 403 and
// 429 has an access line with the user (for Basic and create: the user name tried), the address and
// the problem code; the password never appears.
// =============================================================================================

const PASSWORD = 'alice-secret-pw-4711';
const gw = gatewayFixture({
  users: { alice: PASSWORD, bob: 'bob-pw' },
  log: 'info',
  config: (f) => ({
    upstreams: { up: { url: f.echo.url } },
    routes: [
      { path: '/v1/limited', upstream: 'up', rateLimit: { requests: 1, windowSeconds: 60 } },
      { path: '/v1/closed', upstream: 'up', websocket: false },
      { path: '/v1', upstream: 'up' },
    ],
    lockout: { maxFailuresPerUser: 2, windowSeconds: 60 },
    log: { level: 'info', access: true },
  }),
});
const requests = () => gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request');
const lineOf = async (requestId: string) => {
  await expect.poll(() => requests().find((l) => l.requestId === requestId)).toBeDefined();
  return requests().find((l) => l.requestId === requestId)!;
};
const id = (() => {
  let n = 0;
  return () => `audit-${++n}`;
})();

describe('access lines name the user, the address and the code', () => {
  it('token create: the user on success and the user name tried on failure, never the password', async () => {
    const ok = id();
    expect((await postJson(gw.base, '/v1/tokens/create', { appKey: 'alice', appSecret: PASSWORD }, { 'x-request-id': ok })).status).toBe(200);
    expect(await lineOf(ok)).toMatchObject({ path: '/v1/tokens/create', status: 200, user: 'alice', address: '127.0.0.1' });
    const failed = id();
    expect((await postJson(gw.base, '/v1/tokens/create', { appKey: 'mallory', appSecret: 'guess' }, { 'x-request-id': failed })).status).toBe(401);
    expect(await lineOf(failed)).toMatchObject({ status: 401, user: 'mallory', code: 'invalid_credentials', address: '127.0.0.1' });
  });

  it('token refresh and revoke name the token\'s user', async () => {
    const pair = await createTokens(gw.base, 'bob', 'bob-pw');
    const refreshed = id();
    const r = await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken }, { 'x-request-id': refreshed });
    expect(r.status).toBe(200);
    const next = await r.json() as { accessToken: string };
    expect(await lineOf(refreshed)).toMatchObject({ status: 200, user: 'bob', address: '127.0.0.1' });
    const revoked = id();
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: next.accessToken, type: 'ACCESS_TOKEN' }, { 'x-request-id': revoked })).status).toBe(200);
    expect(await lineOf(revoked)).toMatchObject({ status: 200, user: 'bob', address: '127.0.0.1' });
    const reused = id();
    expect((await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken }, { 'x-request-id': reused })).status).toBe(401);
    expect(await lineOf(reused)).toMatchObject({ status: 401, code: 'invalid_refresh_token', address: '127.0.0.1' });
  });

  it('revoking by refresh token names the user of the session it ended, and nobody when none was live', async () => {
    const pair = await createTokens(gw.base, 'bob', 'bob-pw');
    const revoked = id();
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: pair.refreshToken, type: 'REFRESH_TOKEN' }, { 'x-request-id': revoked })).status).toBe(200);
    expect(await lineOf(revoked)).toMatchObject({ path: '/v1/tokens/revoke', status: 200, user: 'bob', address: '127.0.0.1' });
    const again = id();
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: pair.refreshToken, type: 'REFRESH_TOKEN' }, { 'x-request-id': again })).status).toBe(200);
    expect(await lineOf(again)).not.toHaveProperty('user');
    // An access token names its user even when its session is gone.
    const byAccess = id();
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: pair.accessToken, type: 'ACCESS_TOKEN' }, { 'x-request-id': byAccess })).status).toBe(200);
    expect(await lineOf(byAccess)).toMatchObject({ status: 200, user: 'bob' });
  });

  it('a refused Basic request (401, then 429 locked) names the user name tried', async () => {
    for (let i = 0; i < 2; i++) {
      const rid = id();
      const r = await fetch(`${gw.base}/v1/x`, { headers: { authorization: basic('alice', `wrong-${i}`), 'x-request-id': rid } });
      expect(r.status).toBe(401);
      expect(await lineOf(rid)).toMatchObject({ status: 401, user: 'alice', code: 'invalid_credentials', address: '127.0.0.1' });
    }
    const locked = id();
    expect((await fetch(`${gw.base}/v1/x`, { headers: { authorization: basic('alice', 'wrong-3'), 'x-request-id': locked } })).status).toBe(429);
    expect(await lineOf(locked)).toMatchObject({ status: 429, user: 'alice', code: 'too_many_attempts', address: '127.0.0.1' });
  });

  it('403 and the rate limit\'s 429 name the authenticated user', async () => {
    const bob = basic('bob', 'bob-pw');
    const first = id();
    expect((await fetch(`${gw.base}/v1/limited/a`, { headers: { authorization: bob, 'x-request-id': first } })).status).toBe(200);
    const limited = id();
    expect((await fetch(`${gw.base}/v1/limited/a`, { headers: { authorization: bob, 'x-request-id': limited } })).status).toBe(429);
    expect(await lineOf(limited)).toMatchObject({ status: 429, user: 'bob', via: 'basic', code: 'rate_limited', address: '127.0.0.1' });
    const forbidden = id();
    const refused = parseAnswer(await exchange(gw.port, handshake('/v1/closed/x', { Authorization: bob, 'X-Request-Id': forbidden })));
    expect(refused.status).toBe(403);
    expect(await lineOf(forbidden)).toMatchObject({ status: 403, user: 'bob', via: 'basic', code: 'websocket_not_allowed', address: '127.0.0.1' });
  });

  it('no line holds a password', () => {
    for (const line of gw.logs) {
      expect(line).not.toContain(PASSWORD);
      expect(line).not.toContain('bob-pw');
    }
  });
});
