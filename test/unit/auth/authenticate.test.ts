import { execFileSync } from 'node:child_process';
import { X509Certificate, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { apiKeyAuthenticator } from '../../../src/auth/api-key.js';
import { authenticate, unverifiedIssuer } from '../../../src/auth/authenticate.js';
import type { Authenticator } from '../../../src/auth/authenticator.js';
import { basicAuthenticator } from '../../../src/auth/basic.js';
import { bearerAuthenticator } from '../../../src/auth/bearer.js';
import { ClientCertificates } from '../../../src/auth/peer-certificates.js';
import { cookieSessionAuthenticator, SESSION_PURPOSE } from '../../../src/auth/cookie-session.js';
import { mtlsAuthenticator } from '../../../src/auth/mtls.js';
import { oidcAuthenticator } from '../../../src/auth/oidc.js';
import { Sealer } from '../../../src/auth/seal.js';
import { ManualClock } from '../../../src/clock.js';
import { checkConfig } from '../../../src/config/validate.js';
import { DomainError } from '../../../src/core/domain-error.js';
import type { Exchange } from '../../../src/core/exchange.js';
import type { Principal } from '../../../src/core/principal.js';
import { hashSync } from '../../../src/credentials/bcrypt.js';
import { toProblem } from '../../../src/http/errors.js';
import { Lockout } from '../../../src/credentials/lockout.js';
import { PasswordCheck } from '../../../src/credentials/password-check.js';
import { PasswordVerifier } from '../../../src/credentials/password-verifier.js';
import { MemoryCounters } from '../../../src/stores/counters/memory-counters.js';
import { IssuerKeys } from '../../../src/identity/issuer-keys.js';
import { silentLogger } from '../../../src/log.js';
import { ApiKeys, type ApiKeyRecord } from '../../../src/stores/tables/api-keys.js';
import { createStore } from '../../../src/stores/kinds.js';
import { MemoryTable } from '../../../src/stores/tables/shared-table.js';
import { AccessTokenCodec } from '../../../src/tokens/access-token.js';
import { loadKeys } from '../../../src/tokens/keys.js';
import { refreshKey } from '../../../src/tokens/refresh-token.js';
import { TokenService } from '../../../src/tokens/service.js';
import { TEST_COST } from '../../support/fixtures.js';

/**
 * The authenticate step with every source on, built as runtime.ts builds them (in its order): API keys,
 * Basic, a provider's tokens, the gateway's own tokens, client certificates, the session cookie. Each
 * credential's shape must reach exactly its one source: no other source's parse or verify is called (a
 * source without a scheme is asked by its own presence check, its parse, only when no header decided).
 */

const clock = new ManualClock();
const now = () => Math.floor(clock.now() / 1000);
const AUD = 'gateway-api';
const policy = { maxFailuresPerUser: 1000, maxFailuresPerAccount: 1000, windowSeconds: 900, addressBurst: 1000, addressFailuresPerMinute: 1000 };
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

let provider: Server;
let issuer: string;
let providerKey: KeyObject;
let dir: string;
let certificateDer: Buffer;

/** A provider token: RS256 with the provider's key (or any header and key given). */
function providerToken(claims: Record<string, unknown> = {}, header: Record<string, unknown> = { alg: 'RS256', typ: 'at+jwt', kid: 'k1' }): string {
  const input = `${b64(header)}.${b64({ iss: issuer, aud: AUD, sub: 'u-1', preferred_username: 'pat', iat: now(), exp: now() + 600, ...claims })}`;
  return `${input}.${sign('sha256', Buffer.from(input), providerKey).toString('base64url')}`;
}

beforeAll(async () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  providerKey = privateKey;
  provider = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'RS256', use: 'sig' }] }));
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(provider.address() as { port: number }).port}`;
  // A client certificate: the connection's, as a verified TLS socket reports it.
  dir = mkdtempSync(join(tmpdir(), 'gw-authenticate-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/OU=ops/CN=carol', '-keyout', join(dir, 'c.key'), '-out', join(dir, 'c.pem')], { stdio: 'ignore' });
  certificateDer = new X509Certificate(readFileSync(join(dir, 'c.pem'))).raw;
});

afterAll(async () => {
  await new Promise((resolve) => provider.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

/** Every source on, as runtime.ts lists them; each parse and verify spied on (called through). */
async function sources() {
  const { config, problems } = checkConfig({
    users: { htpasswd: 'users.htpasswd' },
    tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
    identity: { issuers: [{ name: 'corp', issuer: 'https://idp.example.com', audiences: [AUD] }] },
  }, '', tmpdir());
  expect(problems).toEqual([]);
  const keys = loadKeys(config.tokens);
  const verifier = new PasswordVerifier(new Map([['alice', hashSync('alice-pw', { cost: TEST_COST })]]), 60_000, clock);
  const passwords = new PasswordCheck(verifier, new Lockout(new MemoryCounters(clock), policy, silentLogger, () => clock.now()), { addressBurst: 1000, narrowForMs: 2000 });
  const store = createStore({ kind: 'memory' }, clock, silentLogger);
  const codec = new AccessTokenCodec(keys, { issuer: config.tokens.issuer, audience: config.tokens.audience, ttlSeconds: 300 }, clock);
  const tokens = new TokenService(codec, store, passwords, (user) => verifier.credentialVersion(user), {
    accessTtlSeconds: 300, refreshTtlSeconds: 3600, refreshReuseGraceSeconds: 0, refreshKey: refreshKey(undefined, keys.signing.key),
  }, clock);
  const apiKeys = new ApiKeys(new MemoryTable<ApiKeyRecord>(), () => clock.now());
  const issuerKeys = new IssuerKeys({ ...config.identity.issuers[0]!, issuer, jwksUri: `${issuer}/jwks`, algorithms: ['RS256'], userClaim: 'preferred_username' }, clock, silentLogger);
  const certificates = new ClientCertificates('cn');
  const sealer = new Sealer(Buffer.alloc(32, 7));
  const list = [
    apiKeyAuthenticator(apiKeys, { header: 'X-Api-Key', prefix: 'agk' }),
    basicAuthenticator(passwords, (user) => verifier.credentialVersion(user)),
    oidcAuthenticator([issuerKeys]),
    bearerAuthenticator(tokens),
    mtlsAuthenticator(certificates),
    cookieSessionAuthenticator('__Host-gateway', sealer, store, () => clock.now()),
  ] as Authenticator[];
  const spies = list.map((a) => ({ via: a.via, parse: vi.spyOn(a, 'parse'), verify: vi.spyOn(a, 'verify') }));
  const { accessToken } = await tokens.create({ user: 'alice', password: 'alice-pw', address: '198.51.100.7' });
  const { key } = await apiKeys.create({ name: 'ci' }, 'agk');
  const sid = await store.createSession({ sub: 'bob', uv: 'oidc' }, 3600);
  const cookie = `__Host-gateway=${sealer.seal(SESSION_PURPOSE, { sid, user: 'bob', groups: ['staff'], exp: now() + 3600 })}`;
  return { list, spies, step: authenticate(list), accessToken, key, cookie };
}

type Sources = Awaited<ReturnType<typeof sources>>;

interface Asking {
  headers?: Record<string, string>;
  /** The connection presents this verified certificate. */
  certificate?: boolean;
  forwardAuth?: boolean;
  repeated?: boolean;
}

/** A socket per kind of connection, so a certificate is read once per connection as on a server. */
const plainSocket = {};
const certificateSocket = {
  authorized: true,
  getPeerCertificate: () => ({ raw: certificateDer, subject: { CN: 'carol', OU: 'ops' }, subjectaltname: '', valid_to: new Date(Date.now() + 86_400_000).toUTCString() }),
};

function exchangeFor(asking: Asking): Exchange {
  const req = { headers: asking.headers ?? {}, socket: asking.certificate ? certificateSocket : plainSocket, httpVersionMajor: 1 } as unknown as IncomingMessage;
  return {
    req, address: '198.51.100.7', triedUser: undefined, certificate: undefined, principal: undefined,
    repeatedAuthorization: asking.repeated ?? false, forwardAuth: asking.forwardAuth ? {} : undefined,
  } as unknown as Exchange;
}

const STEP_CODES = new Set<string>(['invalid_request', 'missing_credentials', 'credentials_not_accepted']);

/** What an answer says: the principal's source, or the refusal's class, status, code, detail and challenge. */
function outcomeOf(ex: Exchange, err: unknown): unknown {
  if (err === undefined) return { via: ex.principal!.via, user: ex.principal!.user };
  // The step's own refusals (no credentials, an unknown scheme, a repeated header), as the HTTP table answers them.
  if (err instanceof DomainError && STEP_CODES.has(err.code)) {
    const problem = toProblem(err);
    return { problem: problem.status, code: problem.code, detail: problem.message, headers: problem.headers };
  }
  if (err instanceof DomainError) return { domain: err.code, detail: err.message, challenge: err.challenge };
  throw err;
}

async function run(step: (ex: Exchange) => void | Promise<void>, asking: Asking): Promise<unknown> {
  const ex = exchangeFor(asking);
  try {
    await step(ex);
    return outcomeOf(ex, undefined);
  } catch (err) {
    return outcomeOf(ex, err);
  }
}

/** Runs the step and says which sources were asked (parse) and which proved credentials (verify). */
async function asked(s: Sources, asking: Asking) {
  for (const spy of s.spies) {
    spy.parse.mockClear();
    spy.verify.mockClear();
  }
  const outcome = await run(s.step, asking);
  return {
    outcome,
    parsed: s.spies.filter((x) => x.parse.mock.calls.length > 0).map((x) => x.via),
    verified: s.spies.filter((x) => x.verify.mock.calls.length > 0).map((x) => x.via),
  };
}

describe('authenticate: each credential reaches its one source (every source on)', () => {
  let s: Sources;
  beforeEach(async () => {
    s = await sources();
  });

  it('Basic: the Basic source alone', async () => {
    expect(await asked(s, { headers: { authorization: basic('alice', 'alice-pw') } }))
      .toEqual({ outcome: { via: 'basic', user: 'alice' }, parsed: ['basic'], verified: ['basic'] });
  });

  it('the gateway\'s own token: the bearer source alone, the first time (its iss names no provider) and once it knows it', async () => {
    for (let i = 0; i < 2; i++) {
      expect(await asked(s, { headers: { authorization: `Bearer ${s.accessToken}` } }))
        .toEqual({ outcome: { via: 'bearer', user: 'alice' }, parsed: ['bearer'], verified: ['bearer'] });
    }
    // Not even the provider's verified-token cache is asked for a token the gateway verified before.
    const oidc = s.list.find((a) => a.via === 'oidc')!;
    const knows = vi.spyOn(oidc, 'knows');
    await asked(s, { headers: { authorization: `Bearer ${s.accessToken}` } });
    expect(knows).toHaveBeenCalledTimes(1);
  });

  it('a provider\'s token: the provider source alone, the first time (by its iss) and from its cache of verified tokens', async () => {
    const token = providerToken();
    for (let i = 0; i < 2; i++) {
      expect(await asked(s, { headers: { authorization: `Bearer ${token}` } }))
        .toEqual({ outcome: { via: 'oidc', user: 'pat' }, parsed: ['oidc'], verified: ['oidc'] });
    }
  });

  it('an API key: the API key source alone, as a bearer credential of its prefix or in its header', async () => {
    expect(await asked(s, { headers: { authorization: `Bearer ${s.key}` } }))
      .toEqual({ outcome: { via: 'api_key', user: 'ci' }, parsed: ['api_key'], verified: ['api_key'] });
    expect(await asked(s, { headers: { 'x-api-key': s.key } }))
      .toEqual({ outcome: { via: 'api_key', user: 'ci' }, parsed: ['api_key'], verified: ['api_key'] });
    // A key beside an Authorization header: 400 from the key's source, no other asked.
    expect(await asked(s, { headers: { 'x-api-key': s.key, authorization: `Bearer ${s.accessToken}` } }))
      .toMatchObject({ outcome: { problem: 400, code: 'invalid_request' }, parsed: ['api_key'], verified: [] });
  });

  it('a client certificate: no Authorization source asked; with a bearer token beside it, the token decides alone', async () => {
    expect(await asked(s, { certificate: true }))
      .toEqual({ outcome: { via: 'mtls', user: 'carol' }, parsed: ['mtls'], verified: ['mtls'] });
    expect(await asked(s, { certificate: true, headers: { authorization: `Bearer ${s.accessToken}` } }))
      .toEqual({ outcome: { via: 'bearer', user: 'alice' }, parsed: ['bearer'], verified: ['bearer'] });
  });

  it('a session cookie: no Authorization source asked; the certificate source only by its presence check', async () => {
    expect(await asked(s, { headers: { cookie: s.cookie } }))
      .toEqual({ outcome: { via: 'oidc-session', user: 'bob' }, parsed: ['mtls', 'oidc-session'], verified: ['oidc-session'] });
    expect(await asked(s, { headers: { cookie: s.cookie, authorization: basic('alice', 'alice-pw') } }))
      .toEqual({ outcome: { via: 'basic', user: 'alice' }, parsed: ['basic'], verified: ['basic'] });
  });

  it('a forward-auth question: the asking proxy\'s certificate is not asked about', async () => {
    expect(await asked(s, { certificate: true, forwardAuth: true }))
      .toMatchObject({ outcome: { problem: 401, code: 'missing_credentials' }, parsed: ['oidc-session'], verified: [] });
  });

  it('refusals: none, an unknown scheme, a repeated Authorization, a malformed bearer token', async () => {
    const challenges = ['Basic realm="auth-gateway", charset="UTF-8"', 'Bearer realm="auth-gateway"'];
    expect(await asked(s, {})).toEqual({
      outcome: { problem: 401, code: 'missing_credentials', detail: 'credentials are required: Authorization: Basic or Bearer', headers: { 'WWW-Authenticate': challenges } },
      parsed: ['mtls', 'oidc-session'], verified: [],
    });
    expect(await asked(s, { headers: { authorization: 'Digest username="alice"' } })).toEqual({
      outcome: { problem: 401, code: 'invalid_credentials', detail: 'the Authorization scheme must be Basic or Bearer', headers: { 'WWW-Authenticate': challenges } },
      parsed: ['mtls', 'oidc-session'], verified: [],
    });
    expect(await asked(s, { repeated: true, headers: { authorization: `Bearer ${s.accessToken}` } }))
      .toMatchObject({ outcome: { problem: 400, code: 'invalid_request' }, parsed: [], verified: [] });
    expect(await asked(s, { headers: { authorization: 'Bearer not-a-token' } }))
      .toMatchObject({ outcome: { domain: 'invalid_token' }, parsed: ['bearer'], verified: ['bearer'] });
  });

  it('a token its form sends to a source that declines it goes to the gateway\'s own source, as before', async () => {
    // A provider's iss in a payload whose header is no JSON: the provider source declines it (not a JWS).
    const token = `${Buffer.from('not json').toString('base64url')}.${b64({ iss: issuer })}.x`;
    expect(unverifiedIssuer(token)).toBe(issuer);
    expect(await asked(s, { headers: { authorization: `Bearer ${token}` } }))
      .toMatchObject({ outcome: { domain: 'invalid_token' }, parsed: ['oidc', 'bearer'], verified: ['bearer'] });
  });
});

/** The step as it was: every source asked in list order until one recognises the request. */
function walkingStep(authenticators: readonly Authenticator[]): (ex: Exchange) => void | Promise<void> {
  const challenges = [...new Set(authenticators.flatMap((a) => (a.challenge === undefined ? [] : [a.challenge])))];
  const schemes = [...new Set(authenticators.flatMap((a) => (a.scheme === undefined ? [] : [a.scheme[0]!.toUpperCase() + a.scheme.slice(1)])))];
  const challenged = (err: unknown, a: Authenticator) => {
    if (err instanceof DomainError) err.challenge ??= a.challenge;
    return err;
  };
  return (ex) => {
    if (ex.repeatedAuthorization) throw new DomainError('invalid_request', 'the request carries more than one Authorization header');
    for (const a of authenticators) {
      if (a.fromConnection && ex.forwardAuth !== undefined) continue;
      const credentials = a.parse(ex.req);
      if (credentials === undefined) continue;
      let verified: Principal | Promise<Principal>;
      try {
        verified = a.verify(credentials, ex);
      } catch (err) {
        throw challenged(err, a);
      }
      if (!(verified instanceof Promise)) {
        ex.principal = verified;
        return undefined;
      }
      return verified.then((p) => {
        ex.principal = p;
      }, (err: unknown) => {
        throw challenged(err, a);
      });
    }
    const code = ex.req.headers.authorization === undefined ? 'missing_credentials' : 'credentials_not_accepted';
    const detail = code === 'missing_credentials' ? `credentials are required: Authorization: ${schemes.join(' or ')}` : `the Authorization scheme must be ${schemes.join(' or ')}`;
    throw new DomainError(code, detail, { challenge: challenges });
  };
}

describe('authenticate answers as asking every source in turn did', () => {
  it('for every spelling and mix of credentials, cold and warm', async () => {
    const s = await sources();
    const walk = walkingStep(s.list);
    const own = s.accessToken;
    const theirs = providerToken();
    const [head, body] = own.split('.');
    const authorizations = [
      `Bearer ${own}`, `bearer ${own}`, `BEARER ${own}`, `Bearer  ${own}`, `Bearer\t${own}`, ` Bearer ${own}`, `Bearer ${own} `, `Bearer ${own}.x`,
      `Bearer ${theirs}`, `bearer ${theirs}`, `Bearer\t${theirs}`, `Bearer  ${theirs}`, `Bearer ${theirs}x`,
      `Bearer ${providerToken({ exp: now() - 60 })}`, `Bearer ${providerToken({}, { alg: 'HS256', typ: 'JWT', kid: 'k1' })}`,
      `Bearer ${providerToken({ iss: 'https://idp.example.com' })}`, `Bearer ${providerToken({ iss: 'auth-gateway' })}`,
      `Bearer ${head}.${b64({ iss: issuer, sub: 'x' })}.AAAA`, `Bearer ${b64({ alg: 'none' })}.${b64({ iss: issuer })}.`,
      `Bearer ${s.key}`, `bearer ${s.key}`, `Bearer ${s.key} x`, `Bearer  ${s.key}`, `Bearer\t${s.key}`, 'Bearer agk_', 'Bearer agk_0123456789abcdef_x',
      `Bearer agk_${body}`, 'Bearer a.b.c.d', 'Bearer ...', 'Bearer e30.e30.e30', 'Bearer not-a-token', 'Bearer', 'Bearer ', ' Bearer', '        Bearer',
      basic('alice', 'alice-pw'), basic('alice', 'wrong'), `basic ${Buffer.from('alice:alice-pw').toString('base64')}`, 'Basic', 'Basic !!', 'Basic\tYTpi',
      'Digest x', 'Negotiate abc', '', ' ', 'Beare x', 'Bearers x', 'Bearer\u00a0x', '\u00a0Bearer x', 'B\u0130asic x',
    ];
    const variants: Asking[] = [];
    for (const authorization of [undefined, ...authorizations]) {
      const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
      variants.push({ headers });
      variants.push({ headers: { ...headers, cookie: s.cookie } });
      variants.push({ headers, certificate: true });
      variants.push({ headers, certificate: true, forwardAuth: true });
      variants.push({ headers: { ...headers, 'x-api-key': s.key } });
      variants.push({ headers: { ...headers, 'x-api-key': 'nonsense' } });
    }
    variants.push({ repeated: true, headers: { authorization: `Bearer ${own}` } });
    let compared = 0;
    // Twice: the first round meets the tokens cold (the step first), the second in the sources' caches.
    for (let round = 0; round < 2; round++) {
      for (const asking of variants) {
        const answer = await run(s.step, asking);
        expect(answer, JSON.stringify(asking)).toEqual(await run(walk, asking));
        compared++;
      }
    }
    expect(compared).toBe(variants.length * 2);
  });
});
