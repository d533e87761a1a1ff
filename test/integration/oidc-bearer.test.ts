import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oidcAuthenticator } from '../../src/auth/oidc.js';
import { checkConnections } from '../../src/cli/connect.js';
import { ManualClock } from '../../src/clock.js';
import type { Exchange } from '../../src/core/exchange.js';
import type { Principal } from '../../src/core/principal.js';
import { IssuerKeys } from '../../src/identity/issuer-keys.js';
import { createLogger } from '../../src/log.js';
import { createTokens, echoUpstream, htpasswd, startGateway, testConfig, basic, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { forge, decodeJwt } from '../security/jwt-forge.js';
import { signingKey, TestCa, TestProvider, type ProviderSettings, type SigningKey } from '../support/oidc-provider.js';
import { waitUntil } from '../support/poll.js';

/**
 * Bearer tokens of a real OpenID Provider (node-oidc-provider in its own process, loopback HTTPS with a
 * test CA made by openssl) beside the gateway's own: JWT access tokens by the client credentials grant
 * with a resource indicator, verified against the provider's published keys.
 */

const AUD = 'gateway-api';
const RESOURCES: ProviderSettings['resources'] = {
  'https://rs256.test': { alg: 'RS256', audience: AUD },
  'https://ps256.test': { alg: 'PS256', audience: AUD },
  'https://es256.test': { alg: 'ES256', audience: AUD },
  'https://eddsa.test': { alg: 'EdDSA', audience: AUD },
  'https://other-api.test': { alg: 'RS256', audience: 'other-api' },
  'https://long.test': { alg: 'RS256', audience: AUD, ttl: 7200 },
};
const CLIENTS = [
  { client_id: 'svc', client_secret: 'svc-secret', grant_types: ['client_credentials'], response_types: [], redirect_uris: [] },
  { client_id: 'plain', client_secret: 'plain-secret', grant_types: ['client_credentials'], response_types: [], redirect_uris: [] },
];
const CLIENT_CLAIMS = {
  svc: { preferred_username: 'svc-user', realm_access: { roles: ['ops', 'dev'] } },
  plain: { preferred_username: 'plain-user' },
};

let ca: TestCa;
let rsa: SigningKey;
let ec: SigningKey;
let ed: SigningKey;
let provider: TestProvider;
/** A provider the gateway is not configured for. */
let stranger: TestProvider;
let strangerKey: SigningKey;
let users: Users;
let echo: EchoUpstream;
let gw: RunningGateway;
let logs: string[];
const clock = new ManualClock(Date.now());

function issuerSettings(issuer: string): Record<string, unknown> {
  return { name: 'corp', issuer, audiences: [AUD], userClaim: 'preferred_username', groupsClaim: 'realm_access.roles', caFile: ca.caFile };
}

function gatewayConfig(issuer: string): Record<string, unknown> {
  return {
    identity: { issuers: [issuerSettings(issuer)] },
    forwardAuth: { path: '/auth/verify' },
    upstreams: { app: { url: echo.url } },
    routes: [
      { path: '/api', upstream: 'app' },
      { path: '/ops', upstream: 'app', allow: { groups: ['ops'] } },
      { path: '/admins', upstream: 'app', allow: { groups: ['admins'] } },
    ],
  };
}

async function call(base: string, path: string, authorization: string): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${base}${path}`, { headers: { authorization } });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

/** A token signed with the provider's own key (the tests hold it), for claims the provider would not issue. */
function forged(payload: Record<string, unknown>, key: SigningKey = rsa, header: Record<string, unknown> = {}): string {
  const now = Math.floor(clock.now() / 1000);
  return forge({ alg: 'RS256', typ: 'at+jwt', kid: key.kid, ...header }, {
    iss: provider.issuer, aud: AUD, sub: 'svc', preferred_username: 'forged-user', iat: now, exp: now + 300, ...payload,
  }, { alg: 'RS256', privateKey: key.privateKey });
}

beforeAll(async () => {
  ca = new TestCa();
  rsa = signingKey('rsa');
  ec = signingKey('ec');
  ed = signingKey('ed25519');
  strangerKey = signingKey('rsa');
  [provider, stranger] = await Promise.all([
    TestProvider.start(ca, { keys: [rsa, ec, ed], resources: RESOURCES, clients: CLIENTS, clientClaims: CLIENT_CLAIMS }),
    TestProvider.start(ca, { keys: [strangerKey], resources: RESOURCES, clients: CLIENTS, clientClaims: CLIENT_CLAIMS }),
  ]);
  users = htpasswd({ alice: 'alice-pw' });
  echo = await echoUpstream();
  logs = [];
  gw = await startGateway(testConfig(users.file, gatewayConfig(provider.issuer)), { clock, log: createLogger('debug', (line) => logs.push(line)) });
}, 30_000);

afterAll(async () => {
  await gw?.close();
  await echo?.close();
  await provider?.close();
  await stranger?.close();
  users?.remove();
  ca?.remove();
});

describe('provider bearer tokens', () => {
  it.each(['https://rs256.test', 'https://ps256.test', 'https://es256.test', 'https://eddsa.test'])('a token for %s reaches the upstream with its user and groups', async (resource) => {
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', resource);
    const res = await call(gw.base, '/api/things', `Bearer ${token}`);
    expect(res.status).toBe(200);
    const headers = res.body.headers as Record<string, string>;
    expect(headers['x-authenticated-user']).toBe('svc-user');
    expect(headers['x-authenticated-via']).toBe('oidc');
    expect(headers['x-authenticated-groups']).toBe('ops,dev');
    // The provider's token is not passed on (forwardAuthorization is off).
    expect(headers.authorization).toBeUndefined();
  });

  it('groups from the claim count for allow rules', async () => {
    const svc = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://rs256.test');
    const plain = await provider.clientCredentialsToken('plain', 'plain-secret', 'https://rs256.test');
    expect((await call(gw.base, '/ops/x', `Bearer ${svc}`)).status).toBe(200);
    expect((await call(gw.base, '/admins/x', `Bearer ${svc}`)).body.code).toBe('forbidden');
    const refused = await call(gw.base, '/ops/x', `Bearer ${plain}`);
    expect(refused.status).toBe(403);
    const ok = await call(gw.base, '/api/x', `Bearer ${plain}`);
    expect((ok.body.headers as Record<string, string>)['x-authenticated-groups'] ?? '').toBe('');
  });

  it('forward-auth answers about a provider token with its user and groups, and judges its allow rules', async () => {
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://rs256.test');
    const ask = (uri: string) => fetch(`${gw.base}/auth/verify`, { headers: { authorization: `Bearer ${token}`, 'x-forwarded-method': 'GET', 'x-forwarded-uri': uri } });
    const ok = await ask('/ops/board');
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-authenticated-user')).toBe('svc-user');
    expect(ok.headers.get('x-authenticated-via')).toBe('oidc');
    expect(ok.headers.get('x-authenticated-groups')).toBe('ops,dev');
    expect((await ask('/admins/board')).status).toBe(403);
  });

  it('the gateway\'s own tokens and Basic keep working beside them', async () => {
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    const own = await call(gw.base, '/api/x', `Bearer ${accessToken}`);
    expect(own.status).toBe(200);
    expect((own.body.headers as Record<string, string>)['x-authenticated-via']).toBe('bearer');
    expect((await call(gw.base, '/api/x', basic('alice', 'alice-pw'))).status).toBe(200);
  });

  it('a token for another audience is refused', async () => {
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://other-api.test');
    expect(decodeJwt(token).payload.aud).toBe('other-api');
    const res = await call(gw.base, '/api/x', `Bearer ${token}`);
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('invalid_token');
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('a JWT whose typ marks another kind of token (a logout token, an ID token) is refused; an access token\'s typ passes', async () => {
    for (const typ of ['logout+jwt', 'application/logout+jwt', 'id_token+jwt', 'token-introspection+jwt', 'secevent+jwt', '', 7]) {
      const res = await call(gw.base, '/api/x', `Bearer ${forged({}, rsa, { typ })}`);
      expect(res.status, `typ ${JSON.stringify(typ)}`).toBe(401);
      expect(res.body).toMatchObject({ code: 'invalid_token', detail: expect.stringContaining('typ') });
    }
    for (const typ of [undefined, 'JWT', 'jwt', 'at+jwt', 'AT+JWT', 'application/at+jwt']) {
      expect((await call(gw.base, '/api/x', `Bearer ${forged({}, rsa, { typ })}`)).status, `typ ${String(typ)}`).toBe(200);
    }
  });

  it('a token issued to one of the gateway\'s audiences (azp: an ID token of its own client) is refused; azp of another client passes', async () => {
    const own = await call(gw.base, '/api/x', `Bearer ${forged({ azp: AUD, nonce: 'n' }, rsa, { typ: 'JWT' })}`);
    expect(own.status).toBe(401);
    expect(own.body).toMatchObject({ code: 'invalid_token', detail: expect.stringContaining('azp') });
    expect((await call(gw.base, '/api/x', `Bearer ${forged({ azp: 42 })}`)).status).toBe(401);
    const caller = await call(gw.base, '/api/x', `Bearer ${forged({ azp: 'some-cli' })}`);
    expect(caller.status).toBe(200);
    expect((caller.body.headers as Record<string, string>)['x-authenticated-user']).toBe('forged-user');
  });

  it('an expired token is refused (past the skew), while the same token unexpired passes', async () => {
    const now = Math.floor(clock.now() / 1000);
    expect((await call(gw.base, '/api/x', `Bearer ${forged({})}`)).status).toBe(200);
    // Within the 30 s skew: still good.
    expect((await call(gw.base, '/api/x', `Bearer ${forged({ iat: now - 600, exp: now - 10 })}`)).status).toBe(200);
    const res = await call(gw.base, '/api/x', `Bearer ${forged({ iat: now - 600, exp: now - 31 })}`);
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('token_expired');
    expect((await call(gw.base, '/api/x', `Bearer ${forged({ nbf: now + 120 })}`)).body.code).toBe('invalid_token');
    expect((await call(gw.base, '/api/x', `Bearer ${forged({ exp: undefined })}`)).body.code).toBe('invalid_token');
  });

  it('a token of a provider the gateway does not know is refused', async () => {
    const token = await stranger.clientCredentialsToken('svc', 'svc-secret', 'https://rs256.test');
    const res = await call(gw.base, '/api/x', `Bearer ${token}`);
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('invalid_token');
  });

  it('a token naming the configured issuer but signed by another provider\'s key is refused', async () => {
    // The stranger's key, under the kid of the configured provider's key and under its own.
    for (const kid of [rsa.kid, strangerKey.kid]) {
      const res = await call(gw.base, '/api/x', `Bearer ${forged({}, strangerKey, { kid })}`);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('invalid_token');
    }
  });

  it('alg none is refused, with or without a kid', async () => {
    const now = Math.floor(clock.now() / 1000);
    const claims = { iss: provider.issuer, aud: AUD, preferred_username: 'mallory', iat: now, exp: now + 300 };
    for (const header of [{ alg: 'none' }, { alg: 'none', kid: rsa.kid }, { alg: 'NONE', kid: rsa.kid }]) {
      const res = await call(gw.base, '/api/x', `Bearer ${forge(header, claims, { alg: 'none' })}`);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('invalid_token');
    }
  });

  it('HS256 keyed with the provider\'s public key (PEM or JWK) is refused', async () => {
    const now = Math.floor(clock.now() / 1000);
    const claims = { iss: provider.issuer, aud: AUD, preferred_username: 'mallory', iat: now, exp: now + 300 };
    const pem = rsa.publicKey.export({ format: 'pem', type: 'spki' });
    const jwk = JSON.stringify(rsa.publicKey.export({ format: 'jwk' }));
    for (const secret of [pem, Buffer.from(pem), jwk]) {
      const res = await call(gw.base, '/api/x', `Bearer ${forge({ alg: 'HS256', kid: rsa.kid }, claims, { alg: 'HS256', secret })}`);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('invalid_token');
    }
  });

  it('a token whose signature was tampered with is refused', async () => {
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://rs256.test');
    const { parts } = decodeJwt(token);
    const payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString()) as Record<string, unknown>;
    payload.realm_access = { roles: ['admins'] };
    const tampered = `${parts[0]}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${parts[2]}`;
    expect((await call(gw.base, '/admins/x', `Bearer ${tampered}`)).status).toBe(401);
  });

  it('verifies without waiting and without a fetch when the keys are cached', async () => {
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://es256.test');
    const before = await provider.jwksFetches();
    for (let i = 0; i < 20; i++) expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
    expect(await provider.jwksFetches()).toBe(before);
    // The authenticator itself answers synchronously on a cached key: a Principal, not a promise.
    const keys = new IssuerKeys(testConfig(users.file, gatewayConfig(provider.issuer)).identity.issuers[0]!, clock, createLogger('silent'));
    await keys.refresh();
    const auth = oidcAuthenticator([keys]);
    const req = { headers: { authorization: `Bearer ${token}` } } as IncomingMessage;
    const verified = auth.verify(auth.parse(req)!, {} as Exchange);
    expect(verified).not.toBeInstanceOf(Promise);
    expect((verified as Principal).user).toBe('svc-user');
    // EdDSA is jose's (jsonwebtoken 9 has none), a promise the first time; then from the cache of verified tokens, at once.
    const ed = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://eddsa.test');
    const edReq = { headers: { authorization: `Bearer ${ed}` } } as IncomingMessage;
    const first = auth.verify(auth.parse(edReq)!, {} as Exchange);
    expect(first).toBeInstanceOf(Promise);
    expect((await first).user).toBe('svc-user');
    const warm = auth.verify(auth.parse(edReq)!, {} as Exchange);
    expect(warm).not.toBeInstanceOf(Promise);
    expect((warm as Principal).user).toBe('svc-user');
    // The gateway's own tokens are not recognised by it.
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    expect(auth.parse({ headers: { authorization: `Bearer ${accessToken}` } } as IncomingMessage)).toBeUndefined();
  });
});

describe('config check --connect', () => {
  it('fetches each issuer\'s discovery and keys and reports them; a wrong CA is reported', async () => {
    const config = testConfig(users.file, gatewayConfig(provider.issuer));
    const [line] = (await checkConnections(config)).filter((r) => r.what.startsWith('issuer'));
    expect(line).toMatchObject({ what: `issuer corp ${provider.issuer}`, ok: true });
    expect(line!.detail).toContain(`discovery named ${provider.issuer}/jwks`);
    expect(line!.detail).toContain('3 usable key(s)');
    expect(line!.detail).toContain(`${ec.kid} ES256`);
    const untrusted = testConfig(users.file, { ...gatewayConfig(provider.issuer), identity: { issuers: [{ ...issuerSettings(provider.issuer), caFile: undefined }] } });
    const [refused] = (await checkConnections(untrusted)).filter((r) => r.what.startsWith('issuer'));
    expect(refused!.ok).toBe(false);
    expect(refused!.detail).toMatch(/keys not fetched: .*(UNABLE_TO_VERIFY|certificate)/i);
  });
});

describe('key rotation and outages', () => {
  it('a rotated key verifies with no restart, with one JWK Set fetch per rotation; an unknown kid refetches at most every 10 s', async () => {
    // The gateway fetched the keys at start: an unknown kid within 10 s of that would not refetch.
    clock.advance(11_000);
    const rotated = signingKey('rsa');
    await provider.restart({ keys: [rotated, rsa, ec, ed] });
    expect(await provider.jwksFetches()).toBe(0);
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://rs256.test');
    expect(decodeJwt(token).header.kid).toBe(rotated.kid);
    const answers = await Promise.all(Array.from({ length: 8 }, () => call(gw.base, '/api/x', `Bearer ${token}`)));
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    expect(await provider.jwksFetches()).toBe(1);
    expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
    expect(await provider.jwksFetches()).toBe(1);
    // A kid nobody knows, right after that fetch: refused without another fetch.
    const unknown = signingKey('rsa');
    expect((await call(gw.base, '/api/x', `Bearer ${forged({}, unknown)}`)).status).toBe(401);
    expect(await provider.jwksFetches()).toBe(1);
    // Ten seconds later one more fetch is allowed (and the kid is still unknown: 401).
    clock.advance(10_000);
    expect((await call(gw.base, '/api/x', `Bearer ${forged({}, unknown)}`)).status).toBe(401);
    expect(await provider.jwksFetches()).toBe(2);
  });

  it('the provider down with keys cached: its tokens keep passing, past max-age too; the failed fetches are logged and counted', async () => {
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://eddsa.test');
    expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
    await provider.stop();
    try {
      expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
      // Past the default max-age (300 s): a background refresh fails; the request does not wait for it.
      clock.advance(301_000);
      expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
      await waitUntil(async () => (await errorFetches(gw)) >= 1, 10_000);
      expect(logs.some((l) => l.includes('provider keys not fetched'))).toBe(true);
      expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
    } finally {
      await provider.resume();
    }
  });

  it('the provider down and no keys known: 503 for its tokens only; the gateway\'s own tokens and Basic unaffected', async () => {
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://rs256.test');
    await provider.stop();
    const cold = await startGateway(testConfig(users.file, gatewayConfig(provider.issuer)), { clock });
    try {
      const res = await call(cold.base, '/api/x', `Bearer ${token}`);
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('identity_provider_unavailable');
      expect(res.headers.get('retry-after')).toBe('10');
      // Again at once (inside the refetch throttle): 503 without waiting, never a pass or a 500.
      expect((await call(cold.base, '/api/x', `Bearer ${token}`)).body.code).toBe('identity_provider_unavailable');
      const { accessToken } = await createTokens(cold.base, 'alice', 'alice-pw');
      expect((await call(cold.base, '/api/x', `Bearer ${accessToken}`)).status).toBe(200);
      expect((await call(cold.base, '/api/x', basic('alice', 'alice-pw'))).status).toBe(200);
      // The provider back, the throttle passed: its tokens pass.
      await provider.resume();
      clock.advance(10_000);
      expect((await call(cold.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
    } finally {
      await cold.close();
      if (provider.port && !(await reachable())) await provider.resume();
    }
  });
});

describe('tokens verified before (the cache of verified tokens)', () => {
  it('stop passing when the provider withdraws their key, once the keys are fetched again, and when they expire', async () => {
    // Tokens of two hours: the tests before have moved the gateway's clock minutes ahead of the provider's.
    const token = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://long.test');
    expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
    expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
    const replacement = signingKey('rsa');
    await provider.restart({ keys: [replacement, ec, ed] });
    try {
      // Past the keys' max-age: the next request starts a refresh and passes on the keys it had...
      clock.advance(301_000);
      expect((await call(gw.base, '/api/x', `Bearer ${token}`)).status).toBe(200);
      await waitUntil(async () => (await provider.jwksFetches()) >= 1, 10_000);
      // ...once the new set (without its key) is in, the same token is checked again: refused.
      await waitUntil(async () => (await call(gw.base, '/api/x', `Bearer ${token}`)).status === 401, 10_000);
      // A token of the new key: its kid is unknown until the refetch throttle (10 s) lets one more fetch happen.
      clock.advance(10_000);
      const fresh = await provider.clientCredentialsToken('svc', 'svc-secret', 'https://long.test');
      expect((await call(gw.base, '/api/x', `Bearer ${fresh}`)).status).toBe(200);
      expect((await call(gw.base, '/api/x', `Bearer ${fresh}`)).status).toBe(200);
      // Expired while remembered: token_expired.
      clock.advance(7200_000);
      const expired = await call(gw.base, '/api/x', `Bearer ${fresh}`);
      expect(expired.status).toBe(401);
      expect(expired.body.code).toBe('token_expired');
    } finally {
      await provider.restart({ keys: [rsa, ec, ed] });
      clock.advance(301_000);
    }
  });
});

async function reachable(): Promise<boolean> {
  try {
    await provider.jwksFetches();
    return true;
  } catch {
    return false;
  }
}

async function errorFetches(g: RunningGateway): Promise<number> {
  const metric = await g.gateway.metrics.providerKeyFetches.get();
  return metric.values.filter((v) => v.labels.result === 'error').reduce((n, v) => n + v.value, 0);
}

