import { createHmac, generateKeyPairSync, randomBytes, randomUUID, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { request, type OutgoingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { beforeAll, describe, expect, it } from 'vitest';
import { SECRET, basic, createTokens, gatewayFixture, type Received, type RunningGateway } from '../support/fixtures.js';
import { headerMap, rawResponse, type RawReply } from '../support/raw-client.js';
import { b64url, decodeJwt, encodeJson, forge, forgeRaw, nowSeconds, type JwtHeader, type JwtPayload } from './jwt-forge.js';

// =============================================================================================
// One table of named attacks against the real gateway in front of a request-reflecting upstream.
// Each row sends one probe and states what must come back. A row that must not pass is answered
// with an application/problem+json body carrying a `code`, and the upstream receives NOTHING.
// No probe may produce a 5xx; the suite ends by checking the process still answers /healthz.
// =============================================================================================

// ---------------------------------------------------------------------------------------------
// Probes: node:http for ordinary requests, node:net for bytes fetch/http would refuse or rewrite.
// ---------------------------------------------------------------------------------------------

/** An answer: raw probes read it with the shared raw client; http() gives the same shape. */
type Reply = RawReply;

/** A request with headers given as an object or as a raw [name, value, ...] list (duplicates kept). */
function http(
  port: number,
  method: string,
  path: string,
  headers: OutgoingHttpHeaders | string[] = {},
  body?: string,
): Promise<Reply> {
  const h = Array.isArray(headers) ? ['Host', `127.0.0.1:${port}`, ...headers] : headers;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: h, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({
        status: res.statusCode!,
        headers: headerMap(res.rawHeaders),
        body: Buffer.concat(chunks).toString('utf8'),
        responses: 1,
        elapsedMs: performance.now() - started,
      }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error(`no answer to ${method} ${path} within 5 s`)));
    req.end(body);
  });
}

function postJson(port: number, path: string, body: unknown): Promise<Reply> {
  return http(port, 'POST', path, { 'content-type': 'application/json' }, JSON.stringify(body));
}

/** Writes bytes as they are to a fresh connection and reads what comes back (see rawResponse). */
const raw = rawResponse;

/** A raw GET with valid Basic credentials; `Connection: close` unless told otherwise. */
function rawGet(port: number, target: string, extraHeaders = ''): Promise<Reply> {
  return raw(port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\n${extraHeaders}Connection: close\r\n\r\n`);
}

// ---------------------------------------------------------------------------------------------
// The deployments under attack.
// ---------------------------------------------------------------------------------------------

const ALICE = basic('alice', 'alice-pw');
/** Headers other gateways and identity-aware proxies set to name the user (some spelled with `_`). */
const OTHER_GATEWAYS_IDENTITY = [
  'X-Amzn-Oidc-Identity', 'X-Amzn-Oidc-Data', 'X-Amzn-Oidc-Accesstoken', 'X_Amzn_Oidc_Identity',
  'X-Goog-Authenticated-User-Email', 'X-Goog-Authenticated-User-Id', 'X-Goog-Iap-Jwt-Assertion', 'X_Goog_Authenticated_User_Email',
  'X-Consumer-Username', 'X-Consumer-Id', 'X-Consumer-Custom-Id', 'X-Consumer-Groups', 'X-Credential-Identifier', 'X-Anonymous-Consumer', 'X_Consumer_Username',
  'X-Auth-Request-Preferred-Groups', 'X-Auth-Request-Name',
  'X-Forwarded-User', 'X-Forwarded-Email', 'X-Forwarded-Preferred-Username', 'X-Forwarded-Groups', 'X-Forwarded-Access-Token', 'X_Forwarded_User',
  'Remote-User', 'Remote-Groups', 'Remote-Email', 'Remote-Name', 'X-Remote-User', 'X-WEBAUTH-USER', 'Remote_User',
  'X-Pomerium-Jwt-Assertion', 'X-Pomerium-Claim-Name', 'X-Ms-Client-Principal', 'X-Ms-Client-Principal-Name', 'X-Ms-Client-Principal-Id', 'X-Ms-Token-Aad-Id-Token',
  'Cf-Access-Authenticated-User-Email', 'Cf-Access-Jwt-Assertion', 'X-Authentik-Username', 'X-Authentik-Groups', 'X-Vouch-User', 'Tailscale-User-Login',
  'X-Userinfo',
];
/** 72 bytes: all bcrypt reads. The same plus one byte must never be accepted as this. */
const LONG_PW = 'L'.repeat(36) + '0123456789abcdefghijklmnopqrstuvwxyz';
const CAROL_PW = 'a:b:c';
const OTHER_SECRET = 'another-deployments-secret-another-deployments-secret';
const HIGH_LOCKOUT = { maxFailuresPerUser: 100_000, addressBurst: 100_000, addressFailuresPerMinute: 6000, windowSeconds: 60 };
const ROUTES = [
  { path: '/v1/conversations', upstream: 'up', paging: { sortable: ['campaignId', 'createdAt'] } },
  { path: '/v1/contacts', upstream: 'up' },
];
const TIMING_TRIES = 15;
const TIMING_TOLERANCE: [number, number] = [0.6, 1.6];

// Every line every deployment logs, at debug with the access log on: searched for secrets at the end.
const LOG = { level: 'debug', access: true };
const USERS = { alice: 'alice-pw', carol: CAROL_PW, long: LONG_PW };
const deployment = (echoUrl: string) => ({ lockout: HIGH_LOCKOUT, upstreams: { up: { url: echoUrl, timeoutMs: 2000 } }, routes: ROUTES, log: LOG });

let rsaPublic: KeyObject;
let attackerRsa: KeyObject;
/** HS256 (the default). */
const hs = gatewayFixture({ users: USERS, log: 'debug', config: (f) => deployment(f.echo.url) });
/** RS256 with a key generated for this run, in front of the same echo as hs. */
const rsa = gatewayFixture({
  users: USERS,
  echo: false,
  log: 'debug',
  before: (f) => {
    const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
    rsaPublic = pair.publicKey;
    attackerRsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    writeFileSync(join(f.users.dir, 'signing.pem'), pair.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  },
  config: (f) => ({ ...deployment(hs.echo.url), tokens: { signing: { alg: 'RS256', privateKeyFile: join(f.users.dir, 'signing.pem') } } }),
});
/** A cost-10 bcrypt user, for timing. */
const slow = gatewayFixture({
  users: { tim: 'tim-correct-pw' },
  cost: 10,
  echo: false,
  log: 'debug',
  config: () => ({ lockout: HIGH_LOCKOUT, log: LOG }),
});

/** The attacker's view of genuine tokens: header (kid), claims (a live sid). */
let live: { accessToken: string; refreshToken: string; kid: string; sid: string; uv: string; other: string };
let rsaLive: { accessToken: string; kid: string; sid: string };

beforeAll(async () => {
  expect(Buffer.byteLength(LONG_PW)).toBe(72);
  const a = await createTokens(hs.base, 'alice', 'alice-pw');
  const b = await createTokens(hs.base, 'alice', 'alice-pw');
  const decoded = decodeJwt(a.accessToken);
  live = { accessToken: a.accessToken, refreshToken: a.refreshToken, kid: decoded.header.kid as string, sid: decoded.payload.sid as string, uv: decoded.payload.uv as string, other: b.accessToken };
  const r = await createTokens(rsa.base, 'alice', 'alice-pw');
  const rd = decodeJwt(r.accessToken);
  rsaLive = { accessToken: r.accessToken, kid: rd.header.kid as string, sid: rd.payload.sid as string };
  expect(rd.header.alg).toBe('RS256');
});

// ---------------------------------------------------------------------------------------------
// Token forging.
// ---------------------------------------------------------------------------------------------

/** Claims of a valid access token of alice's live session; undefined values are left out. */
function claims(overrides: Partial<Record<string, unknown>> = {}, sid = live.sid): JwtPayload {
  const now = nowSeconds();
  const all: Record<string, unknown> = {
    sub: 'alice', sid, uv: live.uv, jti: randomUUID(), iat: now, exp: now + 600, iss: 'auth-gateway', aud: 'auth-gateway', ...overrides,
  };
  for (const k of Object.keys(all)) if (all[k] === undefined) delete all[k];
  return all;
}

function hsHeader(overrides: JwtHeader = {}): JwtHeader {
  const h: JwtHeader = { alg: 'HS256', typ: 'JWT', kid: live.kid, ...overrides };
  for (const k of Object.keys(h)) if (h[k] === undefined) delete h[k];
  return h;
}

/** Signed with the gateway's real secret: only the one defect the row names is wrong. */
function signedHs(payload: JwtPayload, header: JwtHeader = hsHeader()): string {
  return forge(header, payload, { alg: 'HS256', secret: SECRET });
}

function bearer(gw: RunningGateway, token: string, headers: Record<string, string> = {}): Promise<Reply> {
  return http(gw.port, 'GET', '/v1/contacts', { authorization: `Bearer ${token}`, ...headers });
}

// ---------------------------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------------------------

interface Attack {
  name: string;
  probe: () => Promise<Reply>;
  /** The status (or one of the statuses) that must come back. */
  status: number | number[];
  /** For rejections: the problem `code` (or one of them). */
  code?: string | string[];
  /** A WWW-Authenticate value must match this. */
  challenge?: RegExp;
  /** For requests that must pass: checks the one request the upstream received. */
  upstream?: (received: Received) => void;
}

/** RFC 6750 section 3.1: an invalid token is answered with error="invalid_token". */
const INVALID_TOKEN = /^Bearer realm="auth-gateway", error="invalid_token"/;
/** A header that is not `Bearer <token68>` is a malformed request rather than a bad token. */
const MALFORMED_BEARER = /^Bearer realm="auth-gateway", error="invalid_(request|token)"/;
const SMUGGLED = '/v1/contacts/smuggled';

/** A raw request line: what fetch and URL would have normalized away is sent as it is. */
const pathAttack = (target: string, status: number, code: string): Attack => ({
  name: `path: GET ${target} with valid Basic credentials → ${status} ${code}, nothing upstream`,
  probe: () => rawGet(hs.port, target),
  status,
  code,
});

/** A first request with valid credentials, then a second one hidden in its body. */
function smuggle(framing: string, body: string): string {
  return `POST /v1/contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\n${framing}\r\n${body}` +
    `GET ${SMUGGLED} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\n\r\n`;
}

function asIdentity(r: Received, user: string, via: 'basic' | 'bearer'): void {
  expect(r.headers['x-authenticated-user']).toBe(user);
  expect(r.headers['x-authenticated-via']).toBe(via);
  const names = r.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  expect(names.filter((n) => n === 'x-authenticated-user')).toHaveLength(1);
  expect(names.filter((n) => n === 'x-authenticated-via')).toHaveLength(1);
}

const ATTACKS: Attack[] = [
  // ------------------------------------------------------------------------------- controls
  // Without these, every rejection below could be an artefact of the probe, not of the defence.
  {
    name: 'control: a genuine access token passes (Bearer)',
    probe: () => bearer(hs, live.accessToken),
    status: 200,
    upstream: (r) => asIdentity(r, 'alice', 'bearer'),
  },
  {
    name: 'control: a token forged here with the real secret, kid and claims passes (the forger is sound)',
    probe: () => bearer(hs, signedHs(claims())),
    status: 200,
    upstream: (r) => asIdentity(r, 'alice', 'bearer'),
  },
  {
    name: 'control: a genuine RS256 access token passes on the RS256 deployment',
    probe: () => bearer(rsa, rsaLive.accessToken),
    status: 200,
    upstream: (r) => asIdentity(r, 'alice', 'bearer'),
  },

  // ------------------------------------------------------------------------------------ JWT
  {
    name: 'jwt: alg "none", unsigned, with a valid kid',
    probe: () => bearer(hs, forge(hsHeader({ alg: 'none' }), claims(), { alg: 'none' })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: alg "None" (other spelling), unsigned, with a valid kid',
    probe: () => bearer(hs, forge(hsHeader({ alg: 'None' }), claims(), { alg: 'none' })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: alg "none" with the genuine signature left on',
    probe: () => bearer(hs, `${encodeJson(hsHeader({ alg: 'none' }))}.${decodeJwt(live.accessToken).parts[1]}.${decodeJwt(live.accessToken).parts[2]}`),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: key confusion: HS256 keyed with the RS256 public key (SPKI PEM), same kid',
    probe: () => bearer(rsa, forge({ alg: 'HS256', typ: 'JWT', kid: rsaLive.kid }, claims({}, rsaLive.sid), {
      alg: 'HS256', secret: rsaPublic.export({ type: 'spki', format: 'pem' }) as string,
    })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: key confusion: HS256 keyed with the RS256 public key (PKCS#1 PEM), same kid',
    probe: () => bearer(rsa, forge({ alg: 'HS256', typ: 'JWT', kid: rsaLive.kid }, claims({}, rsaLive.sid), {
      alg: 'HS256', secret: rsaPublic.export({ type: 'pkcs1', format: 'pem' }) as string,
    })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: key confusion: HS256 keyed with the RS256 public key (DER), same kid',
    probe: () => bearer(rsa, forge({ alg: 'HS256', typ: 'JWT', kid: rsaLive.kid }, claims({}, rsaLive.sid), {
      alg: 'HS256', secret: rsaPublic.export({ type: 'spki', format: 'der' }),
    })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: RS256 signed with the attacker\'s own RSA key, the gateway\'s kid and an embedded jwk',
    probe: () => {
      const jwk = { ...attackerRsa.export({ format: 'jwk' }), d: undefined, p: undefined, q: undefined, dp: undefined, dq: undefined, qi: undefined };
      return bearer(rsa, forge({ alg: 'RS256', typ: 'JWT', kid: rsaLive.kid, jwk }, claims({}, rsaLive.sid), { alg: 'RS256', privateKey: attackerRsa }));
    },
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: RS256 token presented to the HS256 deployment under the HS kid (algorithm pinned per key)',
    probe: () => bearer(hs, forge(hsHeader({ alg: 'RS256' }), claims(), { alg: 'RS256', privateKey: attackerRsa })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: HS384 with the real secret and kid (algorithm not the pinned one)',
    probe: () => {
      const header = encodeJson(hsHeader({ alg: 'HS384' }));
      const payload = encodeJson(claims());
      // HS384 signature over the same input, with the real secret.
      const sig = createHmac('sha384', SECRET).update(`${header}.${payload}`).digest('base64url');
      return bearer(hs, `${header}.${payload}.${sig}`);
    },
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: unknown kid',
    probe: () => bearer(hs, signedHs(claims(), hsHeader({ kid: 'no-such-key' }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: kid with path characters ../../etc/passwd',
    probe: () => bearer(hs, signedHs(claims(), hsHeader({ kid: '../../etc/passwd' }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: kid /dev/null (empty key file), signed with an empty secret',
    probe: () => bearer(hs, forge(hsHeader({ kid: '/dev/null' }), claims(), { alg: 'HS256', secret: '' })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: kid "__proto__" (prototype lookup)',
    probe: () => bearer(hs, signedHs(claims(), hsHeader({ kid: '__proto__' }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: kid as an array holding the real kid (not a string)',
    probe: () => bearer(hs, signedHs(claims(), hsHeader({ kid: [live.kid] }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: missing kid',
    probe: () => bearer(hs, signedHs(claims(), hsHeader({ kid: undefined }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: header is not JSON',
    probe: () => bearer(hs, forgeRaw(b64url('{"alg":"HS256","kid":'), encodeJson(claims()), { alg: 'HS256', secret: SECRET })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: missing exp (real secret, correct kid): a token that would never expire',
    probe: () => bearer(hs, signedHs(claims({ exp: undefined }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: exp as a string far in the future',
    probe: () => bearer(hs, signedHs(claims({ exp: '99999999999' }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: wrong iss (real secret, correct kid)',
    probe: () => bearer(hs, signedHs(claims({ iss: 'someone-else' }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: missing iss',
    probe: () => bearer(hs, signedHs(claims({ iss: undefined }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: wrong aud (real secret, correct kid)',
    probe: () => bearer(hs, signedHs(claims({ aud: 'another-api' }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: expired (iat and exp in the past)',
    probe: () => bearer(hs, signedHs(claims({ iat: nowSeconds() - 7200, exp: nowSeconds() - 3600 }))),
    status: 401, code: 'token_expired', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: nbf in the future',
    probe: () => bearer(hs, signedHs(claims({ nbf: nowSeconds() + 3600 }))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: signature stripped (header.payload.)',
    probe: () => {
      const [h, p] = decodeJwt(live.accessToken).parts;
      return bearer(hs, `${h}.${p}.`);
    },
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: signature stripped without the last dot (header.payload)',
    probe: () => {
      const [h, p] = decodeJwt(live.accessToken).parts;
      return bearer(hs, `${h}.${p}`);
    },
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: signature of another genuine token',
    probe: () => {
      const [h, p] = decodeJwt(live.accessToken).parts;
      return bearer(hs, `${h}.${p}.${decodeJwt(live.other).parts[2]}`);
    },
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: payload tampered (sub: admin), genuine signature kept',
    probe: () => {
      const { header, payload, parts } = decodeJwt(live.accessToken);
      return bearer(hs, `${encodeJson(header)}.${encodeJson({ ...payload, sub: 'admin' })}.${parts[2]}`);
    },
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: signed by another deployment\'s secret, presenting this deployment\'s kid',
    probe: () => bearer(hs, forge(hsHeader(), claims(), { alg: 'HS256', secret: OTHER_SECRET })),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: validly signed, for a session that never existed',
    probe: () => bearer(hs, signedHs(claims({}, randomBytes(16).toString('base64url')))),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: a refresh token used as an access token (Bearer)',
    probe: () => bearer(hs, live.refreshToken),
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: an access token used as a refresh token (POST /v1/tokens/refresh)',
    probe: () => postJson(hs.port, '/v1/tokens/refresh', { refreshToken: live.accessToken }),
    status: 401, code: 'invalid_refresh_token',
  },
  {
    name: 'jwt: the access token of a revoked session',
    probe: async () => {
      const pair = await createTokens(hs.base, 'alice', 'alice-pw');
      const revoked = await postJson(hs.port, '/v1/tokens/revoke', { token: pair.refreshToken, type: 'REFRESH_TOKEN' });
      expect(revoked.status).toBe(200);
      return bearer(hs, pair.accessToken);
    },
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: oversized token (10 KB, validly signed with the real secret)',
    probe: () => {
      const token = signedHs(claims({ pad: 'x'.repeat(7600) }));
      expect(token.length).toBeGreaterThan(10_000);
      return bearer(hs, token);
    },
    status: 401, code: 'invalid_token', challenge: INVALID_TOKEN,
  },
  {
    name: 'jwt: Bearer token in quotes (malformed header)',
    probe: () => http(hs.port, 'GET', '/v1/contacts', { authorization: `Bearer "${live.accessToken}"` }),
    status: 401, code: 'invalid_token', challenge: MALFORMED_BEARER,
  },

  // -------------------------------------------------------------------------------- headers
  {
    name: 'headers: spoofed X-Authenticated-User: admin / X-Authenticated-Via: bearer (Basic) → upstream sees alice via basic',
    probe: () => http(hs.port, 'GET', '/v1/contacts', [
      'Authorization', ALICE, 'X-Authenticated-User', 'admin', 'X-Authenticated-Via', 'bearer', 'x-authenticated-user', 'root',
    ]),
    status: 200,
    upstream: (r) => asIdentity(r, 'alice', 'basic'),
  },
  {
    name: 'headers: spoofed X-Authenticated-User: admin / X-Authenticated-Via: basic (Bearer) → upstream sees alice via bearer',
    probe: () => bearer(hs, live.accessToken, { 'X-Authenticated-User': 'admin', 'X-Authenticated-Via': 'basic' }),
    status: 200,
    upstream: (r) => asIdentity(r, 'alice', 'bearer'),
  },
  {
    name: 'headers: identity named hop-by-hop (Connection: X-Authenticated-User) → upstream still sees alice',
    probe: () => http(hs.port, 'GET', '/v1/contacts', [
      'Authorization', ALICE, 'Connection', 'keep-alive, X-Authenticated-User, X-Request-Id', 'X-Authenticated-User', 'admin',
    ]),
    status: 200,
    upstream: (r) => {
      asIdentity(r, 'alice', 'basic');
      expect(r.headers['x-request-id']).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
    },
  },
  {
    // CGI/WSGI/Rack (and nginx with underscores_in_headers) map X-Authenticated_User to the same
    // variable as X-Authenticated-User: a spelling the gateway does not strip is a spoofed identity.
    name: 'headers: underscore spellings X-Authenticated_User / X_Forwarded_For are not forwarded',
    probe: () => http(hs.port, 'GET', '/v1/contacts', [
      'Authorization', ALICE, 'X-Authenticated_User', 'admin', 'X_Authenticated_Via', 'bearer', 'X_Forwarded_For', '6.6.6.6',
    ]),
    status: 200,
    upstream: (r) => {
      asIdentity(r, 'alice', 'basic');
      const protectedNames = ['x-authenticated-user', 'x-authenticated-via', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip'];
      const spoofed = r.rawHeaders.filter((n, i) => i % 2 === 0 && n.includes('_') && protectedNames.includes(n.toLowerCase().replace(/_/g, '-')));
      expect(spoofed, 'underscore variants of identity/forwarding headers reached the upstream').toEqual([]);
    },
  },
  {
    // An upstream that also sits behind (or was written for) another gateway reads the user from that
    // gateway's header: AWS ALB, Google IAP, Kong, oauth2-proxy, Authelia, Pomerium, Azure, Cloudflare Access.
    name: 'headers: other gateways\' identity headers (X-Amzn-Oidc-Identity, X-Goog-Authenticated-User-Email, X-Consumer-Username, …, also with _) are not forwarded',
    probe: () => http(hs.port, 'GET', '/v1/contacts', ['Authorization', ALICE, ...OTHER_GATEWAYS_IDENTITY.flatMap((n) => [n, 'admin'])]),
    status: 200,
    upstream: (r) => {
      asIdentity(r, 'alice', 'basic');
      const passed = r.rawHeaders.filter((n, i) => i % 2 === 0 && OTHER_GATEWAYS_IDENTITY.some((o) => o.toLowerCase() === n.toLowerCase()));
      expect(passed, 'identity headers of other gateways reached the upstream').toEqual([]);
      expect(r.rawHeaders.filter((v, i) => i % 2 === 1 && v === 'admin')).toEqual([]);
    },
  },
  {
    name: 'headers: spoofed X-Forwarded-For / Forwarded / X-Real-IP with trustProxy off → upstream sees only the peer',
    probe: () => http(hs.port, 'GET', '/v1/contacts', [
      'Authorization', ALICE, 'X-Forwarded-For', '6.6.6.6', 'X-Forwarded-For', '7.7.7.7', 'Forwarded', 'for=6.6.6.6;proto=https',
      'X-Real-IP', '6.6.6.6', 'X-Forwarded-Proto', 'https', 'X-Forwarded-Host', 'evil.example',
    ]),
    status: 200,
    upstream: (r) => {
      expect(r.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(r.headers['x-forwarded-proto']).toBe('http');
      expect(r.headers['x-forwarded-host']).toBe(`127.0.0.1:${hs.port}`);
      expect(r.headers.forwarded).toBeUndefined();
      expect(r.headers['x-real-ip']).toBeUndefined();
      expect(JSON.stringify(r.rawHeaders)).not.toMatch(/6\.6\.6\.6|7\.7\.7\.7|evil\.example/);
    },
  },
  {
    name: 'headers: one 64 KB header (limit 16 KB) → 431 problem, nothing upstream',
    probe: () => raw(hs.port, `GET /v1/contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`),
    status: 431, code: 'headers_too_large',
  },
  {
    name: 'headers: duplicate Authorization (valid, then another user) → 400, nothing upstream',
    probe: () => raw(hs.port, `GET /v1/contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nAuthorization: ${basic('carol', CAROL_PW)}\r\nConnection: close\r\n\r\n`),
    status: 400, code: 'invalid_request',
  },
  {
    name: 'headers: duplicate Authorization (Bearer garbage, then valid Basic; names in other case) → 400, nothing upstream',
    probe: () => raw(hs.port, `GET /v1/contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nauthorization: Bearer x.y.z\r\nAUTHORIZATION: ${ALICE}\r\nConnection: close\r\n\r\n`),
    status: 400, code: 'invalid_request',
  },
  {
    name: 'headers: smuggling: Content-Length and Transfer-Encoding: chunked together → 400, no smuggled request upstream',
    probe: () => raw(hs.port, smuggle('Content-Length: 5\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'), { lingerMs: 300 }),
    status: 400, code: 'invalid_request',
  },
  {
    name: 'headers: smuggling: Transfer-Encoding: chunked, identity → 4xx, no smuggled request upstream',
    probe: () => raw(hs.port, smuggle('Transfer-Encoding: chunked, identity\r\n', '0\r\n\r\n'), { lingerMs: 300 }),
    status: [400, 501], code: 'invalid_request',
  },
  {
    name: 'headers: smuggling: obfuscated "Transfer-Encoding : chunked" (space before the colon) → 4xx, no smuggled request upstream',
    probe: () => raw(hs.port, smuggle('Content-Length: 5\r\nTransfer-Encoding : chunked\r\n', '0\r\n\r\n'), { lingerMs: 300 }),
    status: 400, code: 'invalid_request',
  },
  {
    name: 'headers: smuggling: Transfer-Encoding on two lines (chunked / identity) → 4xx, no smuggled request upstream',
    probe: () => raw(hs.port, smuggle('Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n', '0\r\n\r\n'), { lingerMs: 300 }),
    status: [400, 501], code: 'invalid_request',
  },
  {
    name: 'headers: smuggling: Transfer-Encoding folded onto a continuation line → 4xx, no smuggled request upstream',
    probe: () => raw(hs.port, smuggle('Content-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n', '0\r\n\r\n'), { lingerMs: 300 }),
    status: 400, code: 'invalid_request',
  },
  {
    name: 'headers: smuggling: Transfer-Encoding: xchunked → 4xx, no smuggled request upstream',
    probe: () => raw(hs.port, smuggle('Transfer-Encoding: xchunked\r\n', '0\r\n\r\n'), { lingerMs: 300 }),
    status: [400, 501], code: 'invalid_request',
  },
  {
    name: 'headers: smuggling: two different Content-Length values → 400, no smuggled request upstream',
    probe: () => raw(hs.port, smuggle('Content-Length: 0\r\nContent-Length: 5\r\n', 'xxxxx'), { lingerMs: 300 }),
    status: 400, code: 'invalid_request',
  },
  {
    // A legitimate body that happens to contain a request: forwarded as a body, never as a request.
    name: 'headers: a request hidden in a well-framed body is forwarded as bytes of that body only',
    probe: async () => {
      const hidden = `GET ${SMUGGLED} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\n\r\n`;
      return raw(hs.port, `POST /v1/contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nContent-Length: ${Buffer.byteLength(hidden)}\r\n\r\n${hidden}`, { lingerMs: 300 });
    },
    status: 200,
    upstream: (r) => {
      expect(r.url).toBe('/v1/contacts');
      expect(r.body).toContain(SMUGGLED);
    },
  },

  // ---------------------------------------------------------------------------------- paths
  {
    name: 'control: path /v1/contacts/a/../b resolves inside the route → upstream sees /v1/contacts/b',
    probe: () => rawGet(hs.port, '/v1/contacts/a/../b'),
    status: 200,
    upstream: (r) => expect(r.url).toBe('/v1/contacts/b'),
  },
  pathAttack('/v1/conversations/../admin', 404, 'not_found'),
  pathAttack('/v1/conversations/../../admin', 404, 'not_found'),
  pathAttack('/v1/conversations/../../../admin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/%2e%2e/admin', 404, 'not_found'),
  pathAttack('/v1/conversations/%2E%2E/admin', 404, 'not_found'),
  pathAttack('/v1/conversations/.%2e/admin', 404, 'not_found'),
  pathAttack('/v1/conversations/%2e./%2e%2e/admin', 404, 'not_found'),
  pathAttack('/v1/conversations/%252e%252e/admin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/%25%32%65%25%32%65/admin', 400, 'invalid_path'),
  pathAttack('//admin', 404, 'not_found'),
  pathAttack('//v1/conversations/../../admin', 404, 'not_found'),
  pathAttack('/v1/conversations/..\\admin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/..%5cadmin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/..%5Cadmin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/..%2fadmin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/%2e%2e%2fadmin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/..%00/admin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/%u002e%u002e/admin', 400, 'invalid_path'),
  // Tomcat/Spring treat ";..." as a path parameter: "..;" is ".." to them.
  pathAttack('/v1/conversations/..;/admin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/%2e%2e;x=1/admin', 400, 'invalid_path'),
  // The same with the semicolon encoded: Spring decodes %3B after stripping path parameters.
  pathAttack('/v1/conversations/..%3b/admin', 400, 'invalid_path'),
  pathAttack('/v1/conversations/.%2e%3B/admin', 400, 'invalid_path'),
  // A fragment makes Node fall back to url.parse, which turns backslashes into slashes.
  pathAttack('/v1/conversations\\..\\..\\admin#x', 404, 'not_found'),
  // Absolute-form targets are refused outright (Koa cannot even parse some of them).
  pathAttack('http://127.0.0.1/v1/conversations/../admin', 400, 'invalid_path'),
  pathAttack('http://[::1/v1/conversations', 400, 'invalid_path'),
  pathAttack('*', 400, 'invalid_path'),

  // ---------------------------------------------------------------------------------- Basic
  {
    name: 'control: basic: the 72-byte password passes',
    probe: () => http(hs.port, 'GET', '/v1/contacts', { authorization: basic('long', LONG_PW) }),
    status: 200,
    upstream: (r) => asIdentity(r, 'long', 'basic'),
  },
  {
    name: 'basic: the 72-byte password plus "X" (73 bytes) is refused, never truncated',
    probe: () => http(hs.port, 'GET', '/v1/contacts', { authorization: basic('long', `${LONG_PW}X`) }),
    status: 401, code: 'invalid_credentials', challenge: /^Basic realm="auth-gateway"/,
  },
  {
    name: 'basic: the 72-byte password plus "X" is refused by POST /v1/tokens/create too',
    probe: () => postJson(hs.port, '/v1/tokens/create', { appKey: 'long', appSecret: `${LONG_PW}X` }),
    status: 401, code: 'invalid_credentials',
  },
  {
    name: 'basic: NUL byte in the password',
    probe: () => http(hs.port, 'GET', '/v1/contacts', { authorization: `Basic ${Buffer.from('alice:alice-pw\0').toString('base64')}` }),
    status: 401, code: 'invalid_credentials', challenge: /^Basic realm="auth-gateway"/,
  },
  {
    name: 'basic: NUL byte in appSecret of POST /v1/tokens/create',
    probe: () => postJson(hs.port, '/v1/tokens/create', { appKey: 'alice', appSecret: 'alice-pw\0' }),
    status: 401, code: 'invalid_credentials',
  },
  {
    name: 'basic: invalid UTF-8 in the decoded credentials',
    probe: () => http(hs.port, 'GET', '/v1/contacts', { authorization: `Basic ${Buffer.from([0x61, 0x6c, 0x69, 0x63, 0x65, 0x3a, 0xc3, 0x28, 0xff]).toString('base64')}` }),
    status: 401, code: 'invalid_credentials', challenge: /^Basic realm="auth-gateway"/,
  },
  {
    name: 'basic: colon in the password (carol / a:b:c) works, split at the first colon',
    probe: () => http(hs.port, 'GET', '/v1/contacts', { authorization: basic('carol', CAROL_PW) }),
    status: 200,
    upstream: (r) => asIdentity(r, 'carol', 'basic'),
  },
  {
    name: 'basic: a prefix of a password with colons (carol / a:b) is refused',
    probe: () => http(hs.port, 'GET', '/v1/contacts', { authorization: basic('carol', 'a:b') }),
    status: 401, code: 'invalid_credentials', challenge: /^Basic realm="auth-gateway"/,
  },

  // ---------------------------------------------------------------------------------- query
  {
    name: 'query: 10,000 parameters → 414/431/400 problem within 1 s',
    probe: async () => {
      const query = Array.from({ length: 10_000 }, (_, i) => `p${i}=${i}`).join('&');
      const r = await rawGet(hs.port, `/v1/conversations?${query}`);
      expect(r.elapsedMs).toBeLessThan(1000);
      return r;
    },
    status: [414, 431, 400], code: ['uri_too_long', 'headers_too_large', 'invalid_request'],
  },
  {
    name: 'query: a 1 MB query string → 414/431/400 problem within 1 s',
    probe: async () => {
      const r = await rawGet(hs.port, `/v1/conversations?q=${'a'.repeat(1024 * 1024)}`);
      expect(r.elapsedMs).toBeLessThan(1000);
      return r;
    },
    status: [414, 431, 400], code: ['uri_too_long', 'headers_too_large', 'invalid_request'],
  },
  {
    name: 'query: 3,000 sort parameters under the header limit → 400 invalid_sort within 1 s',
    probe: async () => {
      const query = Array.from({ length: 3000 }, (_, i) => (i % 2 ? 'sort=createdAt' : 'sort=campaignId')).join('&');
      const r = await rawGet(hs.port, `/v1/conversations?${query.slice(0, 15_000)}`);
      expect(r.elapsedMs).toBeLessThan(1000);
      return r;
    },
    status: 400, code: 'invalid_sort',
  },
  {
    name: 'control: query: 3,000 pass-through parameters under the header limit are forwarded within 1 s',
    probe: async () => {
      const r = await rawGet(hs.port, `/v1/conversations?${'a=&'.repeat(3000)}size=10`);
      expect(r.elapsedMs).toBeLessThan(1000);
      return r;
    },
    status: 200,
    upstream: (r) => expect(r.url).toMatch(/^\/v1\/conversations\?(a=&){3000}size=10&page=0$/),
  },

  // --------------------------------------------------------------------------------- timing
  {
    name: `timing: unknown user vs wrong password (cost-10 bcrypt, median of ${TIMING_TRIES} each): ratio within [${TIMING_TOLERANCE.join(', ')}]`,
    probe: async () => {
      const unknown: number[] = [];
      const wrong: number[] = [];
      let last: Reply | undefined;
      const once = async (appKey: string, into: number[]) => {
        last = await postJson(slow.port, '/v1/tokens/create', { appKey, appSecret: 'not-the-password' });
        expect(last.status).toBe(401);
        into.push(last.elapsedMs);
      };
      await once('tim', []); // warm-up: first bcrypt, JIT
      await once('nobody-0', []);
      for (let i = 0; i < TIMING_TRIES; i++) {
        await once(`nobody-${i + 1}`, unknown);
        await once('tim', wrong);
      }
      const ratio = median(unknown) / median(wrong);
      expect(median(wrong), 'a cost-10 bcrypt should take some milliseconds').toBeGreaterThan(5);
      expect(ratio, `medians: unknown ${median(unknown).toFixed(1)} ms, wrong ${median(wrong).toFixed(1)} ms`).toBeGreaterThanOrEqual(TIMING_TOLERANCE[0]);
      expect(ratio, `medians: unknown ${median(unknown).toFixed(1)} ms, wrong ${median(wrong).toFixed(1)} ms`).toBeLessThanOrEqual(TIMING_TOLERANCE[1]);
      return last!;
    },
    status: 401, code: 'invalid_credentials',
  },
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}


/** Why an upstream request path is one the route table should never have let through, or undefined. */
function escapedRoutes(url: string): string | undefined {
  const path = url.split('?', 1)[0]!;
  if (!/^\/v1\/(conversations|contacts)(\/|$)/.test(path)) return 'outside the configured route prefixes';
  if (path.startsWith('/admin')) return '/admin';
  if (path.split('/').some((s) => /^(\.|%2e){1,2}$/i.test(s.replace(/%3b/gi, ';').split(';', 1)[0]!))) return 'a dot segment';
  if (/\\|%5c|%2f|%2e/i.test(path)) return 'a backslash, encoded slash or encoded dot';
  if (/%25(2e|2f|5c|25)/i.test(path)) return 'a double-encoded dot, slash, backslash or percent';
  return undefined;
}

describe('attacks against the gateway (one row per named attack)', () => {
  it.each(ATTACKS)('$name', async (row) => {
    const before = hs.echo.received.length;
    const reply = await row.probe();

    expect(reply.status, `no probe may cause a server error: ${reply.body}`).toBeLessThan(500);
    expect([row.status].flat(), reply.body).toContain(reply.status);
    if (row.challenge) expect(reply.headers['www-authenticate'] ?? []).toContainEqual(expect.stringMatching(row.challenge));

    const arrived = hs.echo.received.slice(before);
    if (row.upstream) {
      expect(arrived).toHaveLength(1);
      row.upstream(arrived[0]!);
    } else {
      expect(reply.headers['content-type']?.[0]).toMatch(/^application\/problem\+json/);
      const body = JSON.parse(reply.body) as { status?: unknown; code?: unknown };
      expect(typeof body.code).toBe('string');
      expect(body.status).toBe(reply.status);
      if (row.code) expect([row.code].flat()).toContain(body.code);
      expect(arrived.map((r) => r.url), 'a refused request reached the upstream').toEqual([]);
    }
    // A smuggled second request is never answered and never reaches the upstream.
    expect(reply.responses).toBe(1);
    expect(arrived.filter((r) => r.url.includes('smuggled'))).toEqual([]);
  });

  it('the upstream never received a path outside the route prefixes, a dot segment, a backslash or an encoded slash/dot', () => {
    const escaped = hs.echo.received.map((r) => [r.url, escapedRoutes(r.url)]).filter(([, why]) => why !== undefined);
    expect(escaped).toEqual([]);
    expect(hs.echo.received.length).toBeGreaterThan(0);
  });

  it('no log line of any deployment carries a password, a Basic credential, a token or a refresh token', () => {
    const logLines = [...hs.logs, ...rsa.logs, ...slow.logs];
    const all = logLines.join('\n');
    expect(logLines.length).toBeGreaterThan(ATTACKS.length);
    const secrets = [
      'alice-pw', LONG_PW, CAROL_PW, 'tim-correct-pw', 'not-the-password', ALICE.slice('Basic '.length),
      live.accessToken, live.refreshToken, live.other, rsaLive.accessToken, live.refreshToken.split('.')[1]!,
    ];
    for (const secret of secrets) expect(all.includes(secret), `a log line carries ${secret.slice(0, 24)}…`).toBe(false);
    // Every JWT (real or forged) starts with a base64url JSON object: none is logged whole or in part.
    expect(all).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}/);
  });

  it('after every probe, each deployment still answers /healthz with 200', async () => {
    for (const gw of [hs, rsa, slow]) {
      expect(gw.gateway.server.listening).toBe(true);
      const r = await http(gw.port, 'GET', '/healthz');
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toEqual({ status: 'ok' });
    }
  });
});
