import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/config/config-error.js';
import { inspectConfig } from '../../../src/inspect.js';
import { parseConfig } from '../../../src/config/load.js';
import { newKeyPem } from '../../support/assertion-keys.js';
import { htpasswd } from '../../support/fixtures.js';

const ENV = { JWT_SECRET: 's'.repeat(40) };
const BASE = `
users: { htpasswd: users.htpasswd, groups: users.groups }
tokens:
  signing: { alg: HS256, secret: "\${JWT_SECRET}" }
upstreams:
  reports: { url: "http://127.0.0.1:9001" }
routes:
  - { path: /v1/reports, upstream: reports }
`;

function problems(yaml: string): string[] {
  try {
    parseConfig(yaml, '/etc/gw/gateway.yaml', ENV);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('authorization settings', () => {
  it('defaults: no forward-auth, no assertion, no allow rule, the groups file relative to the configuration', () => {
    const c = parseConfig(BASE, '/etc/gw/gateway.yaml', ENV);
    expect(c.forwardAuth).toBeUndefined();
    expect(c.identity).toEqual({ assertion: undefined, issuers: [] });
    expect(c.users.groups).toBe('/etc/gw/users.groups');
    expect(c.routes[0]!.allow).toBeUndefined();
  });

  it('reads the contract of issue 18', () => {
    const c = parseConfig(`${BASE.replace('  - { path: /v1/reports, upstream: reports }', `  - path: /v1/reports
    upstream: reports
    audience: reports-api
    allow: { users: [alice], groups: [admins], methods: [get, HEAD] }
  - { path: /v1/wiki, allow: { groups: [staff] } }`)}
forwardAuth: { path: /auth/verify }
identity:
  assertion: { keyFile: assertion-key.pem }
`, '/etc/gw/gateway.yaml', ENV);
    expect(c.forwardAuth).toEqual({ path: '/auth/verify' });
    expect(c.identity.assertion).toEqual({ header: 'X-Identity-Assertion', alg: 'ES256', keyFile: '/etc/gw/assertion-key.pem', ttlSeconds: 60 });
    expect(c.routes[0]).toMatchObject({ audience: 'reports-api', allow: { users: ['alice'], groups: ['admins'], methods: ['GET', 'HEAD'] } });
    expect(c.routes[1]).toMatchObject({ path: '/v1/wiki', upstream: undefined, allow: { groups: ['staff'] } });
  });

  it('lists every problem at once, each naming its key', () => {
    const yaml = `
users: { htpasswd: users.htpasswd }
tokens:
  signing: { alg: HS256, secret: "\${JWT_SECRET}" }
upstreams:
  reports: { url: "http://127.0.0.1:9001" }
routes:
  - { path: /v1/reports, upstream: reports, allow: { users: [], groups: [] } }
  - { path: /v1/a, upstream: reports, allow: {} }
  - { path: /v1/b, upstream: reports, allow: { groups: [admins], methods: ["G T"], roles: [x] } }
  - { path: /v1/c }
  - { path: /.well-known, upstream: reports }
  - { path: /auth, upstream: reports }
  - { path: /healthz, upstream: reports }
  - { path: /v1/d, upstream: reports, allow: { users: ["a b"], methods: [] } }
forwardAuth: { path: /auth/verify, mode: x }
identity:
  assertion: { header: Authorization, alg: HS256, ttlSeconds: 1 }
`;
    expect(problems(yaml)).toEqual([
      'routes[0].allow (line 8, column 45) lets no one in: list users or groups (or remove the route)',
      'routes[1].allow (line 9, column 39) must name users, groups or methods (leave allow out to let every authenticated user in)',
      'routes[2].allow.roles (line 10, column 84) is not a known setting',
      'routes[2].allow.methods[0] (line 10, column 76) must be a method name; found "G T"',
      'routes[2].allow.groups (line 10, column 48) names groups, but no source of groups is set: users.groups (the htgroup file), users.store, apiKeys, users.ldap.groupsBase, an identity.issuers groupsClaim or server.tls.clientCa (client certificates, their OU values)',
      'routes[7].allow.users[0] (line 15, column 56) must not contain spaces, commas or colons; found "a b"',
      'routes[7].allow.methods (line 15, column 64) lists no method: leave it out to allow every method',
      'forwardAuth.mode (line 16, column 36) is not a known setting',
      'identity.assertion.alg (line 18, column 39) must be one of ES256, RS256, EdDSA; found "HS256"',
      'identity.assertion.keyFile is required',
      'identity.assertion.ttlSeconds (line 18, column 51) must be an integer of at least 5 no greater than 86400; found 1',
      'identity.assertion.header (line 18, column 16) must not be Authorization (the gateway sets or removes it for another purpose); found "Authorization"',
      'routes[4].path (line 12, column 7) overlaps /.well-known/jwks.json, which the gateway serves itself: choose a route path that does not cover it',
      'routes[5].path (line 13, column 7) overlaps /auth/verify, which the gateway serves itself: choose a route path that does not cover it',
      'routes[6].path (line 14, column 7) overlaps /healthz, which the gateway serves itself: choose a route path that does not cover it',
    ]);
  });

  it('a route without upstream needs forwardAuth; forwardAuth.path must not be an own path', () => {
    expect(problems(BASE.replace('upstream: reports }', '}'))).toEqual(['routes[0].upstream is required (only with forwardAuth may a route leave it out)']);
    expect(problems(`${BASE}forwardAuth: { path: /v1/tokens/check }\n`)).toEqual(['forwardAuth.path (line 9, column 16) must not be under /v1/tokens (served by the gateway itself); found "/v1/tokens/check"']);
    expect(problems(`${BASE}forwardAuth: { path: /healthz }\n`)).toEqual(['forwardAuth.path (line 9, column 16) must not be /healthz (served by the gateway itself); found "/healthz"']);
    expect(problems(`${BASE}forwardAuth: { path: auth }\n`)).toEqual(['forwardAuth.path (line 9, column 16) must be an absolute path of plain segments without a trailing slash, e.g. /auth/verify; found "auth"']);
    // Not an own path while assertions are off.
    expect(problems(BASE.replace('/v1/reports', '/.well-known'))).toEqual([]);
  });
});

describe('config check reads the files of issue 18', () => {
  it('a broken groups file and an assertion key of the wrong type are listed with the rest', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-check-'));
    const users = htpasswd({ alice: 'pw' });
    try {
      writeFileSync(join(dir, 'users.groups'), 'admins alice\n');
      writeFileSync(join(dir, 'key.pem'), newKeyPem('EdDSA'));
      writeFileSync(join(dir, 'gateway.yaml'), `
users: { htpasswd: ${users.file}, groups: users.groups }
tokens: { signing: { alg: HS256, secret: "${'s'.repeat(40)}" } }
identity: { assertion: { keyFile: key.pem } }
`);
      const { problems } = inspectConfig(join(dir, 'gateway.yaml'), {});
      expect(problems).toEqual([
        `${join(dir, 'users.groups')}:1 is not a "group: user1 user2" line`,
        `identity.assertion.keyFile (${join(dir, 'key.pem')}): key 1 is not an EC P-256 key (ES256)`,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      users.remove();
    }
  });
});
