import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWKS_PATH } from '../../src/identity/jwks.js';
import { basic, createTokens, gatewayFixture, postJson } from '../support/fixtures.js';
import { request } from '../support/raw-client.js';
import { newKeyPem } from '../support/assertion-keys.js';
import { assertionUpstream, type AssertionUpstream } from '../support/assertion-upstream.js';
import { writeGroups } from '../support/authz.js';
import { startCaddy, type Caddy } from './support/caddy.js';
import { startNginx, type Nginx } from './support/nginx.js';
import { recipe } from '../../src/recipes/recipes.js';

/**
 * The gateway as the forward-auth service of real proxies from Debian: nginx (auth_request,
 * auth_request_set, proxy_set_header) and Caddy (forward_auth, copy_headers), each in front of an
 * upstream that verifies the identity assertion with jose against the gateway's JWK Set. The proxy
 * configurations are what `auth-gateway recipe` generates from the gateway's (docs/front-proxy.md).
 */

let upstream: AssertionUpstream;
let nginx: Nginx;
let caddy: Caddy;

const carol = basic('carol', 'carol-pw');
const dave = basic('dave', 'dave-pw');
const erin = basic('erin', 'erin-pw');

/** `auth-gateway recipe nginx` for this configuration, as printed, on the test's port. */
function nginxForwardAuth(port: number): string {
  return recipe('nginx', gw.gateway.config, { listen: `127.0.0.1:${port}`, gateway: gw.base }, 'test').text;
}

/** `auth-gateway recipe caddy` for this configuration, as printed, on the test's port. */
function caddyForwardAuth(port: number): string {
  return recipe('caddy', gw.gateway.config, { listen: `127.0.0.1:${port}`, gateway: gw.base }, 'test').text;
}

const gw = gatewayFixture({
  users: { carol: 'carol-pw', dave: 'dave-pw', erin: 'erin-pw' },
  log: 'info',
  echo: false,
  before: async (f) => {
    writeGroups(f.users.dir, { staff: ['carol'], admins: ['erin'] });
    writeFileSync(join(f.users.dir, 'assertion-key.pem'), newKeyPem('ES256'));
    upstream = await assertionUpstream({ jwksUrl: () => `${f.base}${JWKS_PATH}`, audience: 'reports', alg: 'ES256' });
  },
  config: (f) => ({
    // The proxy in front is the gateway's client: its X-Forwarded-For names the real one.
    server: { host: '127.0.0.1', port: 0, trustProxy: 1 },
    log: { level: 'info', access: true },
    users: { htpasswd: f.users.file, groups: join(f.users.dir, 'users.groups'), watch: false },
    forwardAuth: { path: '/auth/verify', trustedProxies: ['127.0.0.1'] },
    upstreams: { reports: { url: upstream.url } },
    identity: { assertion: { keyFile: join(f.users.dir, 'assertion-key.pem') } },
    routes: [
      { path: '/v1/reports', upstream: 'reports', audience: 'reports', allow: { groups: ['staff'] } },
      { path: '/v1/admin', upstream: 'reports', audience: 'reports', allow: { groups: ['admins'] } },
      { path: '/v1/limited', upstream: 'reports', audience: 'reports', rateLimit: { requests: 1, windowSeconds: 60 } },
      // A catch-all /api with an admin-only /api/admin and a paged /api/items under it.
      { path: '/api', upstream: 'reports', audience: 'reports' },
      { path: '/api/admin', upstream: 'reports', audience: 'reports', allow: { groups: ['admins'] } },
      { path: '/api/items', upstream: 'reports', audience: 'reports', paging: { sizes: [10, 20], defaultSize: 10 } },
    ],
  }),
  after: () => upstream?.close(),
});

beforeAll(async () => {
  nginx = await startNginx((port) => nginxForwardAuth(port));
  caddy = await startCaddy((port) => caddyForwardAuth(port));
}, 40_000);

afterAll(async () => {
  await nginx?.stop();
  await caddy?.stop();
});

const proxies = () => [
  { name: 'nginx (auth_request)', base: `http://127.0.0.1:${nginx.port}` },
  { name: 'Caddy (forward_auth)', base: `http://127.0.0.1:${caddy.port}` },
];

describe.each(['nginx (auth_request)', 'Caddy (forward_auth)'])('%s in front, the gateway answering forward-auth', (name) => {
  const base = () => proxies().find((p) => p.name === name)!.base;

  it('an allowed request reaches the upstream with the identity, and the upstream verifies the assertion with jose', async () => {
    const before = upstream.seen.length;
    const res = await fetch(`${base()}/v1/reports/7?size=10`, {
      method: 'POST', body: 'payload',
      // A client's own identity claims are replaced by the gateway's answer.
      headers: { authorization: carol, 'x-authenticated-user': 'mallory', 'x-authenticated-groups': 'admins', 'x-identity-assertion': 'forged' },
    });
    expect(res.status).toBe(200);
    expect(upstream.seen.length).toBe(before + 1);
    const v = upstream.seen.at(-1)!;
    expect(v.error).toBeUndefined();
    expect(v.claims).toMatchObject({ iss: 'auth-gateway', sub: 'carol', aud: 'reports', groups: ['staff'], via: 'basic' });
    expect(v.headers['x-authenticated-user']).toBe('carol');
    expect(v.headers['x-authenticated-via']).toBe('basic');
    expect(v.headers['x-authenticated-groups']).toBe('staff');
    expect(v.headers.authorization).toBeUndefined();
  });

  it('no credentials: 401 at the client with the gateway\'s challenge; the upstream sees nothing', async () => {
    const before = upstream.seen.length;
    const res = await fetch(`${base()}/v1/reports`);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('Basic realm="auth-gateway"');
    expect(upstream.seen.length).toBe(before);
  });

  it('a route the allow rules refuse: 403', async () => {
    const before = upstream.seen.length;
    expect((await fetch(`${base()}/v1/admin`, { headers: { authorization: carol } })).status).toBe(403);
    expect((await fetch(`${base()}/v1/reports`, { headers: { authorization: dave } })).status).toBe(403);
    expect(upstream.seen.length).toBe(before);
  });

  it('a client cannot have another path judged by sending the other header pair', async () => {
    const res = await fetch(`${base()}/v1/admin`, { headers: { authorization: carol, 'x-forwarded-uri': '/v1/reports', 'x-original-uri': '/v1/reports', 'x-forwarded-method': 'GET', 'x-original-method': 'GET' } });
    expect(res.status).toBe(403);
  });

  it('a bearer token passes, and once revoked is refused (401) at once', async () => {
    const { accessToken } = await createTokens(gw.base, 'carol', 'carol-pw');
    const ok = await fetch(`${base()}/v1/reports`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(ok.status).toBe(200);
    expect(upstream.seen.at(-1)!.claims).toMatchObject({ sub: 'carol', via: 'bearer' });
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: accessToken, type: 'ACCESS_TOKEN' })).status).toBe(200);
    const revoked = await fetch(`${base()}/v1/reports`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(revoked.status).toBe(401);
    expect(revoked.headers.get('www-authenticate')).toMatch(/^Bearer realm="auth-gateway"/);
  });
});

describe('what each proxy makes of the other answers', () => {
  it('a 429 and its Retry-After reach the client through both (nginx relays what its auth_request cannot pass)', async () => {
    for (const port of [caddy.port, nginx.port]) {
      await fetch(`http://127.0.0.1:${port}/v1/limited/${port}`, { headers: { authorization: dave } });
      const limited = await fetch(`http://127.0.0.1:${port}/v1/limited/${port}`, { headers: { authorization: dave } });
      expect(limited.status).toBe(429);
      expect(limited.headers.get('content-type')).toBe('application/problem+json');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  });
});

/**
 * The spellings that reached the admin-only route through these very configurations: each proxy forwards
 * the target as the client wrote it (raw bytes here, as curl --path-as-is sends them), so the gateway
 * must not judge a resolved or differently-cased path. Refused descriptions are 400 (relayed through
 * nginx), other cases get the admin route's 403; the upstream sees none of them.
 */
describe.each(['nginx (auth_request)', 'Caddy (forward_auth)'])('%s: a catch-all /api and an admin-only /api/admin', (name) => {
  const port = () => (name.startsWith('nginx') ? nginx.port : caddy.port);
  const refused = () => 400;

  async function send(target: string, authorization: string): Promise<{ status: number; reached: boolean }> {
    const before = upstream.seen.length;
    const res = await request(port(), target, { headers: { Authorization: authorization } });
    return { status: res.status, reached: upstream.seen.length > before };
  }

  it.each([
    ['a # before dot segments', '/api/admin/report#/../../items'],
    ['dot-dot segments', '/api/admin/users/../../items'],
    ['encoded dot-dot segments', '/api/admin/users/%2e%2e/%2e%2e/items'],
    ['dot-dot segments into the admin route', '/api/items/../admin/report'],
    ['repeated slashes', '/api//admin/report'],
    ['an escaped letter', '/api/%61dmin/report'],
  ])('refused, not resolved: %s', async (_what, target) => {
    expect(await send(target, carol)).toEqual({ status: refused(), reached: false });
    // Not even an admin gets a URI not in normal form judged.
    expect(await send(target, erin)).toEqual({ status: refused(), reached: false });
  });

  it.each(['/api/ADMIN/report', '/api/Admin', '/API/ADMIN/report'])('%s is the admin route: 403 for a user outside admins, 200 for an admin', async (target) => {
    expect(await send(target, carol)).toEqual({ status: 403, reached: false });
    expect(await send(target, erin)).toEqual({ status: 200, reached: true });
    expect(upstream.seen.at(-1)!.claims).toMatchObject({ sub: 'erin', groups: ['admins'] });
  });

  it.each([
    '/api/items?size=10&size[]=100000', '/api/items?size=10&size[0]=100000', '/api/items?size%5B%5D=100000',
    '/api/items?SIZE=100000', '/api/ITEMS?size.x=100000', '/api/items?page=1&Page=2',
  ])('another spelling of a paging name is refused: %s', async (target) => {
    expect(await send(target, carol)).toEqual({ status: refused(), reached: false });
  });

  it('the legitimate requests pass: the catch-all, the paged list, the admin route for an admin', async () => {
    expect(await send('/api/items?size=10&page=2', carol)).toEqual({ status: 200, reached: true });
    expect(await send('/api/other/x', carol)).toEqual({ status: 200, reached: true });
    expect(await send('/api/admin/report', erin)).toEqual({ status: 200, reached: true });
    expect(await send('/api/admin/report', carol)).toEqual({ status: 403, reached: false });
  });

  it('the access line names the described path as the client wrote it', async () => {
    const before = gw.logs.length;
    expect((await send('/api/admin/users/../../items', carol)).reached).toBe(false);
    const line = () => gw.logs.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.forwardAuth === true);
    for (let i = 0; i < 100 && !line(); i++) await new Promise((r) => setTimeout(r, 20));
    expect(line()).toMatchObject({ path: '/api/admin/users/../../items', status: 400, code: 'invalid_path' });
  });

  it('identity headers spelt with _ never reach the upstream', async () => {
    const forged = {
      'X-Authenticated_User': 'mallory', 'X_Authenticated-User': 'mallory', 'X_Authenticated_User': 'mallory',
      'X-Authenticated_Groups': 'admins', 'X_Authenticated_Groups': 'admins', 'X-Authenticated_Via': 'basic',
      'X_Identity_Assertion': 'forged', 'X-Identity_Assertion': 'forged',
    };
    const before = upstream.seen.length;
    const res = await request(port(), '/api/items', { headers: { Authorization: carol, ...forged } });
    expect(res.status).toBe(200);
    expect(upstream.seen.length).toBe(before + 1);
    const names = Object.keys(upstream.seen.at(-1)!.headers);
    expect(names.filter((n) => n.includes('_'))).toEqual([]);
    expect(upstream.seen.at(-1)!.headers['x-authenticated-user']).toBe('carol');
  });
});

describe('nginx on the generated recipe', () => {
  it('keeps its connections to the gateway open between checks (upstream keepalive, HTTP/1.1)', async () => {
    let opened = 0;
    const count = () => void opened++;
    gw.gateway.server.on('connection', count);
    try {
      for (let i = 0; i < 8; i++) expect((await request(nginx.port, '/api/items', { headers: { Authorization: carol } })).status).toBe(200);
    } finally {
      gw.gateway.server.off('connection', count);
    }
    // One worker process: its kept connection serves every check (at most one more, if it was closed).
    expect(opened).toBeLessThanOrEqual(1);
  });

  it('passes on both WWW-Authenticate challenges of a 401, as Caddy does', async () => {
    for (const port of [nginx.port, caddy.port]) {
      const res = await request(port, '/api/items');
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Basic realm="auth-gateway"/);
      expect(res.headers['www-authenticate']).toContain('Bearer realm="auth-gateway"');
    }
  });
});
