import { generateKeyPairSync } from 'node:crypto';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { checkConfig } from '../../../src/config/validate.js';
import { maxAgeOf, providerKey } from '../../../src/identity/issuer-keys.js';
import { claimAt } from '../../../src/identity/provider-jwt.js';
import { noGroups } from '../../../src/authz/groups.js';
import type { Principal } from '../../../src/core/principal.js';
import { stillAllowed } from '../../../src/pipeline/steps/allow.js';
import { RouteTable } from '../../../src/routes/route-table.js';

function issuersOf(entry: Record<string, unknown> | Array<Record<string, unknown>>): { problems: string[]; issuers: ReturnType<typeof checkConfig>['config']['identity']['issuers'] } {
  const { config, problems } = checkConfig({
    users: { htpasswd: 'users.htpasswd' },
    tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
    identity: { issuers: Array.isArray(entry) ? entry : [entry] },
  }, '', tmpdir());
  return { problems, issuers: config.identity.issuers };
}

describe('identity.issuers', () => {
  it('takes the documented defaults', () => {
    const { problems, issuers } = issuersOf({ name: 'corp', issuer: 'https://idp.example.com/realms/corp', audiences: ['gateway-api'] });
    expect(problems).toEqual([]);
    expect(issuers).toEqual([{
      name: 'corp', issuer: 'https://idp.example.com/realms/corp', jwksUri: undefined, audiences: ['gateway-api'],
      algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'], userClaim: 'sub', groupsClaim: undefined, caFile: undefined, clockSkewSeconds: 30,
    }]);
  });

  it('reads every key', () => {
    const { problems, issuers } = issuersOf({
      name: 'corp', issuer: 'https://idp.example.com', jwksUri: 'https://idp.example.com/certs', audiences: ['a', 'b'],
      algorithms: ['ES256'], userClaim: 'preferred_username', groupsClaim: 'realm_access.roles', caFile: 'idp-ca.pem', clockSkewSeconds: 0,
    });
    expect(problems).toEqual([]);
    expect(issuers[0]).toMatchObject({ jwksUri: 'https://idp.example.com/certs', algorithms: ['ES256'], groupsClaim: 'realm_access.roles', clockSkewSeconds: 0 });
    expect(issuers[0]!.caFile).toBe(`${tmpdir()}/idp-ca.pem`);
  });

  it('refuses HS*, none, missing audiences, plain http off loopback and repeats', () => {
    const { problems } = issuersOf([
      { name: 'a', issuer: 'http://idp.example.com', algorithms: ['HS256', 'none', 'RS1'] },
      { name: 'a', issuer: 'http://127.0.0.1:9000', jwksUri: 'http://10.0.0.1/certs', audiences: [] },
      { name: 'b', issuer: 'http://127.0.0.1:9000', audiences: ['x'], clockSkewSeconds: 301, typo: 1 },
    ]);
    expect(problems).toEqual(expect.arrayContaining([
      expect.stringMatching(/^identity\.issuers\[0\]\.issuer must be https:\/\//),
      expect.stringMatching(/^identity\.issuers\[0\]\.audiences is required/),
      expect.stringMatching(/^identity\.issuers\[0\]\.algorithms\[0\] is HS256: only asymmetric/),
      expect.stringMatching(/^identity\.issuers\[0\]\.algorithms\[1\] is none: only asymmetric/),
      expect.stringMatching(/^identity\.issuers\[0\]\.algorithms\[2\] must be one of/),
      'identity.issuers[1].name repeats a',
      expect.stringMatching(/^identity\.issuers\[1\]\.jwksUri must be https:\/\//),
      expect.stringMatching(/^identity\.issuers\[1\]\.audiences is required/),
      expect.stringMatching(/^identity\.issuers\[2\]\.issuer repeats/),
      expect.stringMatching(/^identity\.issuers\[2\]\.clockSkewSeconds must be/),
      expect.stringMatching(/^identity\.issuers\[2\]\.typo is not a known setting/),
    ]));
    expect(problems).toHaveLength(11);
  });

  it('a provider must not share the gateway\'s own issuer', () => {
    const { problems } = issuersOf({ name: 'self', issuer: 'http://localhost/auth-gateway', audiences: ['x'] });
    expect(problems).toEqual([]);
    const { config, problems: clash } = checkConfig({
      users: { htpasswd: 'u' }, tokens: { issuer: 'https://gw.example.com', signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
      identity: { issuers: [{ name: 'self', issuer: 'https://gw.example.com', audiences: ['x'] }] },
    }, '', tmpdir());
    expect(config.identity.issuers).toHaveLength(1);
    expect(clash).toEqual(['identity.issuers[0].issuer must not be tokens.issuer (the gateway\'s own tokens carry it); found "https://gw.example.com"']);
  });

  it('a groups claim lets allow rules name groups without a groups file', () => {
    const base = {
      users: { htpasswd: 'u' }, tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
      upstreams: { app: { url: 'http://127.0.0.1:9' } }, routes: [{ path: '/app', upstream: 'app', allow: { groups: ['ops'] } }],
    };
    const issuer = { name: 'corp', issuer: 'https://idp.example.com', audiences: ['x'] };
    expect(checkConfig({ ...base, identity: { issuers: [{ ...issuer, groupsClaim: 'groups' }] } }, '', tmpdir()).problems).toEqual([]);
    expect(checkConfig({ ...base, identity: { issuers: [issuer] } }, '', tmpdir()).problems).toEqual([
      'routes[0].allow.groups names groups, but no source of groups is set: users.groups (the htgroup file), users.store, apiKeys, users.ldap.groupsBase, an identity.issuers groupsClaim or server.tls.clientCa (client certificates, their OU values)',
    ]);
  });
});

describe('JWK Set max-age', () => {
  it('is honoured between 60 s and 24 h, 300 s without one', () => {
    expect(maxAgeOf(undefined)).toBe(300);
    expect(maxAgeOf('public')).toBe(300);
    expect(maxAgeOf('public, max-age=3600')).toBe(3600);
    expect(maxAgeOf('max-age=5')).toBe(60);
    expect(maxAgeOf('max-age=999999')).toBe(86_400);
    expect(maxAgeOf('no-store')).toBe(60);
    expect(maxAgeOf('s-maxage=10, max-age=120')).toBe(120);
  });
});

describe('provider keys', () => {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const small = generateKeyPairSync('rsa', { modulusLength: 1024 });
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const ed = generateKeyPairSync('ed25519');
  const all = ['RS256', 'PS256', 'ES256', 'EdDSA'] as const;
  const jwk = (k: { publicKey: { export(o: { format: 'jwk' }): object } }, extra: Record<string, unknown> = {}) => ({ ...k.publicKey.export({ format: 'jwk' }), ...extra });

  it('pins each key to the configured algorithms that fit it, or to its own alg', () => {
    expect(providerKey(jwk(rsa, { kid: 'r' }), all)[0]!.algs).toEqual(['RS256', 'PS256']);
    expect(providerKey(jwk(rsa, { kid: 'r', alg: 'PS256' }), all)[0]!.algs).toEqual(['PS256']);
    expect(providerKey(jwk(ec), all)[0]!.algs).toEqual(['ES256']);
    expect(providerKey(jwk(ed), all)[0]!.algs).toEqual(['EdDSA']);
    // An alg the issuer does not allow, a key whose alg does not fit it: left out.
    expect(providerKey(jwk(rsa, { alg: 'RS512' }), all)).toEqual([]);
    expect(providerKey(jwk(ec, { alg: 'RS256' }), all)).toEqual([]);
    expect(providerKey(jwk(ec), ['RS256'])).toEqual([]);
  });

  it('leaves out symmetric, small, encryption and malformed keys', () => {
    expect(providerKey({ kty: 'oct', k: 'c2VjcmV0', alg: 'HS256' }, all)).toEqual([]);
    expect(providerKey(jwk(small), all)).toEqual([]);
    expect(providerKey(jwk(rsa, { use: 'enc' }), all)).toEqual([]);
    expect(providerKey(jwk(rsa, { key_ops: ['encrypt'] }), all)).toEqual([]);
    expect(providerKey({ kty: 'RSA', n: 'AQAB' }, all)).toEqual([]);
    expect(providerKey('nope', all)).toEqual([]);
  });

  it('a private JWK yields only its public half', () => {
    const key = providerKey({ ...rsa.privateKey.export({ format: 'jwk' }), kid: 'p' }, all)[0]!;
    expect(key.key.type).toBe('public');
  });
});

describe('claim paths', () => {
  it('reads dotted paths, and a claim whose name has a dot first', () => {
    const claims = { realm_access: { roles: ['a'] }, 'https://example.com/groups': ['b'], sub: 'u' };
    expect(claimAt(claims, 'realm_access.roles')).toEqual(['a']);
    expect(claimAt(claims, 'https://example.com/groups')).toEqual(['b']);
    expect(claimAt(claims, 'realm_access.missing')).toBeUndefined();
    expect(claimAt(claims, 'sub.length')).toBeUndefined();
    expect(claimAt(claims, 'constructor')).toBeUndefined();
  });
});

describe('an open tunnel of a provider principal', () => {
  it('is rechecked with the groups its token carried, not the groups file', () => {
    const { config } = checkConfig({
      users: { htpasswd: 'u' }, tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
      identity: { issuers: [{ name: 'corp', issuer: 'https://idp.example.com', audiences: ['x'], groupsClaim: 'groups' }] },
      upstreams: { app: { url: 'http://127.0.0.1:9' } }, routes: [{ path: '/ops', upstream: 'app', allow: { groups: ['ops'] } }],
    }, '', tmpdir());
    const routes = new RouteTable(config.routes, config.upstreams, config.rateLimit);
    const owner = (groups: string[], ownGroups: boolean): Principal => ({ user: 'svc', via: 'oidc', groups, ownGroups, sid: undefined, expiresAt: undefined, ambient: false, proof: '', credential: undefined });
    expect(stillAllowed(routes, noGroups, owner(['ops'], true), '/ops/live')).toBe(true);
    expect(stillAllowed(routes, noGroups, owner(['dev'], true), '/ops/live')).toBe(false);
    // A principal whose groups came from the groups file is judged by the file as it is now.
    expect(stillAllowed(routes, noGroups, owner(['ops'], false), '/ops/live')).toBe(false);
  });
});
