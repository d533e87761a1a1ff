import { gzipSync } from 'node:zlib';
import jwt from 'jsonwebtoken';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { MemorySessionStore } from '../../src/stores/sessions/memory-session-store.js';
import { createTokens, gatewayFixture, postJson, SECRET } from '../support/fixtures.js';
import { exchangeUntilClosed, requestText } from '../support/raw-client.js';

const clock = new ManualClock(Date.now());
const store = new MemorySessionStore(clock);
const gw = gatewayFixture({
  users: { alice: 'alice-pw', bob: 'bob-pw' },
  echo: false,
  config: () => ({}),
  deps: () => ({ clock, store }),
  after: () => store.close(),
});

async function problem(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  const body = (await res.json()) as Record<string, unknown>;
  expect(body).toMatchObject({ status, code });
  expect(typeof body.type).toBe('string');
  expect(typeof body.title).toBe('string');
  expect(typeof body.detail).toBe('string');
  return body;
}

describe('POST /v1/tokens/create', () => {
  it('returns a token pair for the right appKey and appSecret (spec section 4)', async () => {
    const res = await postJson(gw.base, '/v1/tokens/create', { appKey: 'alice', appSecret: 'alice-pw' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const pair = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(pair).sort()).toEqual(['accessToken', 'expiresInSeconds', 'refreshToken']);
    expect(pair.expiresInSeconds).toBe(5400);
    expect(pair.refreshToken).toMatch(/^[A-Za-z0-9_-]{22}[01][A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/);
  });

  it('issues a JWT with the designed claims, a kid, and exp = iat + accessTtlSeconds', async () => {
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    const decoded = jwt.decode(accessToken, { complete: true })!;
    expect(decoded.header.alg).toBe('HS256');
    expect(typeof decoded.header.kid).toBe('string');
    const claims = decoded.payload as Record<string, unknown>;
    expect(claims).toMatchObject({ sub: 'alice', iss: 'auth-gateway', aud: 'auth-gateway' });
    expect(claims.exp).toBe((claims.iat as number) + 5400);
    expect(typeof claims.sid).toBe('string');
    expect(typeof claims.jti).toBe('string');
    expect(() => jwt.verify(accessToken, SECRET, { algorithms: ['HS256'], clockTimestamp: claims.iat as number })).not.toThrow();
  });

  it('answers a wrong password and an unknown user with the same 401', async () => {
    const wrong = await problem(await postJson(gw.base, '/v1/tokens/create', { appKey: 'bob', appSecret: 'nope' }), 401, 'invalid_credentials');
    const unknown = await problem(await postJson(gw.base, '/v1/tokens/create', { appKey: 'nobody', appSecret: 'nope' }), 401, 'invalid_credentials');
    expect(unknown).toEqual(wrong);
  });

  it.each([
    ['a missing appKey', { appSecret: 'x' }, 'appKey is required'],
    ['a missing appSecret', { appKey: 'alice' }, 'appSecret is required'],
    ['a numeric appKey', { appKey: 42, appSecret: 'x' }, 'appKey must be a string'],
    ['an empty appSecret', { appKey: 'alice', appSecret: '' }, 'appSecret must not be empty'],
    ['a null field', { appKey: null, appSecret: 'x' }, 'appKey is required'],
  ])('refuses %s with 400 naming the field', async (_name, body, detail) => {
    const p = await problem(await postJson(gw.base, '/v1/tokens/create', body), 400, 'invalid_request');
    expect(p.detail).toBe(detail);
  });

  it.each([
    ['malformed JSON', '{"appKey": "alice",', 400, 'malformed_json'],
    ['a JSON array', '["alice"]', 400, 'invalid_request'],
    ['a JSON string', '"alice"', 400, 'invalid_request'],
    ['an empty body', '', 400, 'invalid_request'],
    ['a body of blanks', ' \r\n', 400, 'invalid_request'],
  ])('refuses %s', async (_name, body, status, code) => {
    await problem(await postJson(gw.base, '/v1/tokens/create', body), status, code);
  });

  it('a JSON request without any body (curl -X POST -H "Content-Type: application/json") is a 400 saying so, not a 415', async () => {
    const answer = await exchangeUntilClosed(gw.port, requestText('POST', '/v1/tokens/create', { Host: 'gw', 'Content-Type': 'application/json', Connection: 'close' }), 5000);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('application/problem+json');
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { code: string; detail: string };
    expect(body).toMatchObject({ code: 'invalid_request', detail: 'the request body is missing or empty: send a JSON object (Content-Type: application/json)' });
    const empty = await problem(await postJson(gw.base, '/v1/tokens/create', ''), 400, 'invalid_request');
    expect(empty.detail).toBe(body.detail);
  });

  it('refuses a non-JSON content type with 415', async () => {
    const res = await fetch(`${gw.base}/v1/tokens/create`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'appKey=alice&appSecret=alice-pw',
    });
    await problem(res, 415, 'unsupported_media_type');
  });

  it('refuses a body with a Content-Encoding other than identity with 415 naming identity, rather than reading it as plain JSON', async () => {
    const json = JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' });
    for (const [encoding, body] of [['gzip', json], ['gzip', gzipSync(json)], ['deflate', json], ['br', json], ['identity, gzip', json], ['x-custom', json]] as const) {
      const res = await fetch(`${gw.base}/v1/tokens/create`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': encoding }, body });
      const refused = await problem(res, 415, 'unsupported_media_type');
      expect(refused.detail, encoding).toMatch(/Content-Encoding/);
      expect(res.headers.get('accept-encoding'), encoding).toBe('identity');
    }
    for (const encoding of ['identity', 'Identity']) {
      const res = await fetch(`${gw.base}/v1/tokens/create`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': encoding }, body: json });
      expect(res.status, encoding).toBe(200);
    }
  });

  it('refuses a body over 16 KiB with 413, declared or streamed', async () => {
    const big = JSON.stringify({ appKey: 'alice', appSecret: 'x'.repeat(17 * 1024) });
    await problem(await postJson(gw.base, '/v1/tokens/create', big), 413, 'payload_too_large');
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode(big));
        c.close();
      },
    });
    const res = await fetch(`${gw.base}/v1/tokens/create`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: stream, duplex: 'half',
    } as RequestInit);
    await problem(res, 413, 'payload_too_large');
  });

  it.each(['GET', 'PUT', 'DELETE'])('answers %s on the token paths with 405 and Allow: POST', async (method) => {
    for (const path of ['/v1/tokens/create', '/v1/tokens/refresh', '/v1/tokens/revoke']) {
      const res = await fetch(`${gw.base}${path}`, { method });
      expect(res.headers.get('allow')).toBe('POST');
      await problem(res, 405, 'method_not_allowed');
    }
  });

  it('answers an unknown token path with 404', async () => {
    await problem(await postJson(gw.base, '/v1/tokens/other', {}), 404, 'not_found');
  });
});

describe('POST /v1/tokens/refresh', () => {
  it('returns a new pair; the new refresh token works, and the access token with it', async () => {
    const first = await createTokens(gw.base, 'alice', 'alice-pw');
    const res = await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken });
    expect(res.status).toBe(200);
    const second = (await res.json()) as typeof first;
    expect(second.expiresInSeconds).toBe(5400);
    expect(second.refreshToken).not.toBe(first.refreshToken);
    expect(second.accessToken).not.toBe(first.accessToken);
    expect(jwt.decode(second.accessToken)).toMatchObject({ sub: 'alice' });
    const third = await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: second.refreshToken });
    expect(third.status).toBe(200);
  });

  it('answers a rotated-away refresh token long after the grace period with the same successor while it is unused; after it was used, reuse revokes the whole session', async () => {
    const first = await createTokens(gw.base, 'alice', 'alice-pw');
    const second = (await (await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).json()) as typeof first;
    clock.advance(3_600_000);
    const retried = (await (await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).json()) as typeof first;
    expect(retried.refreshToken).toBe(second.refreshToken);
    const third = (await (await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: second.refreshToken })).json()) as typeof first;
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken }), 401, 'invalid_refresh_token');
    // The thief's replay killed the legitimate holder's tokens too.
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: third.refreshToken }), 401, 'invalid_refresh_token');
    await expect(gw.gateway.tokens.verifyAccessToken(third.accessToken)).rejects.toMatchObject({ code: 'invalid_token' });
  });

  it('answers a retry within the grace period with the same refresh token (a lost answer costs nothing)', async () => {
    const first = await createTokens(gw.base, 'alice', 'alice-pw');
    const lost = (await (await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).json()) as typeof first;
    clock.advance(9_999);
    const res = await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken });
    expect(res.status).toBe(200);
    const retried = (await res.json()) as typeof first;
    expect(retried.refreshToken).toBe(lost.refreshToken);
    await expect(gw.gateway.tokens.verifyAccessToken(retried.accessToken)).resolves.toMatchObject({ user: 'alice' });
    expect((await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: retried.refreshToken })).status).toBe(200);
  });

  it('revokes on a rotated-away refresh token whose successor was used, even within the grace period', async () => {
    const first = await createTokens(gw.base, 'alice', 'alice-pw');
    const second = (await (await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken })).json()) as typeof first;
    const third = (await (await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: second.refreshToken })).json()) as typeof first;
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: first.refreshToken }), 401, 'invalid_refresh_token');
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: third.refreshToken }), 401, 'invalid_refresh_token');
  });

  it.each([
    ['garbage', 'not-a-token'],
    ['a well-formed unknown token', `${'A'.repeat(22)}.${'B'.repeat(43)}`],
    ['an access token', 'ACCESS'],
  ])('refuses %s with 401 invalid_refresh_token', async (_name, token) => {
    const refreshToken = token === 'ACCESS' ? (await createTokens(gw.base, 'alice', 'alice-pw')).accessToken : token;
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken }), 401, 'invalid_refresh_token');
  });

  it('refuses a refresh token whose 60 days have passed', async () => {
    const pair = await createTokens(gw.base, 'alice', 'alice-pw');
    clock.advance(60 * 24 * 3600 * 1000 + 1000);
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken }), 401, 'invalid_refresh_token');
  });

  it('lets an access token expire after expiresInSeconds while its refresh token still works (spec section 3)', async () => {
    const pair = await createTokens(gw.base, 'alice', 'alice-pw');
    clock.advance(5400 * 1000 + 1000);
    await expect(gw.gateway.tokens.verifyAccessToken(pair.accessToken)).rejects.toMatchObject({ code: 'token_expired' });
    const res = await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken });
    expect(res.status).toBe(200);
  });
});

describe('POST /v1/tokens/revoke', () => {
  it.each(['ACCESS_TOKEN', 'REFRESH_TOKEN'] as const)('with type %s kills the access and the refresh token at once', async (type) => {
    const pair = await createTokens(gw.base, 'alice', 'alice-pw');
    const token = type === 'ACCESS_TOKEN' ? pair.accessToken : pair.refreshToken;
    const res = await postJson(gw.base, '/v1/tokens/revoke', { token, type });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    await expect(gw.gateway.tokens.verifyAccessToken(pair.accessToken)).rejects.toMatchObject({ code: 'invalid_token' });
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken }), 401, 'invalid_refresh_token');
  });

  it('finds the token when the type hint is wrong (RFC 7009 section 2.1)', async () => {
    const pair = await createTokens(gw.base, 'alice', 'alice-pw');
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: pair.refreshToken, type: 'ACCESS_TOKEN' })).status).toBe(200);
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken }), 401, 'invalid_refresh_token');
  });

  it('revokes the session of an expired access token', async () => {
    const pair = await createTokens(gw.base, 'alice', 'alice-pw');
    clock.advance(5400 * 1000 + 1000);
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: pair.accessToken, type: 'ACCESS_TOKEN' })).status).toBe(200);
    await problem(await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken }), 401, 'invalid_refresh_token');
  });

  it.each([
    ['garbage', 'garbage', 'ACCESS_TOKEN'],
    ['an unknown refresh token', `${'A'.repeat(22)}.${'B'.repeat(43)}`, 'REFRESH_TOKEN'],
    ['a JWT signed by another key', jwt.sign({ sub: 'x', sid: 'y' }, 'another-secret-another-secret-another'), 'ACCESS_TOKEN'],
  ])('answers 200 for %s (RFC 7009)', async (_name, token, type) => {
    const res = await postJson(gw.base, '/v1/tokens/revoke', { token, type });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
  });

  it('does not let a refresh token of another session revoke a session', async () => {
    const victim = await createTokens(gw.base, 'alice', 'alice-pw');
    const sid = victim.refreshToken.split('.')[0]!;
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: `${sid}.${'C'.repeat(43)}`, type: 'REFRESH_TOKEN' })).status).toBe(200);
    await expect(gw.gateway.tokens.verifyAccessToken(victim.accessToken)).resolves.toMatchObject({ user: 'alice' });
  });

  it.each([
    ['a missing type', { token: 'x' }, 'type is required'],
    ['another type', { token: 'x', type: 'ID_TOKEN' }, 'type must be one of ACCESS_TOKEN, REFRESH_TOKEN'],
    ['a lower-case type', { token: 'x', type: 'access_token' }, 'type must be one of ACCESS_TOKEN, REFRESH_TOKEN'],
    ['a missing token', { type: 'ACCESS_TOKEN' }, 'token is required'],
  ])('refuses %s with 400', async (_name, body, detail) => {
    const p = await problem(await postJson(gw.base, '/v1/tokens/revoke', body), 400, 'invalid_request');
    expect(p.detail).toBe(detail);
  });
});
