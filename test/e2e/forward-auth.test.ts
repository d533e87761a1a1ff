import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWKS_PATH } from '../../src/identity/jwks.js';
import { basic, createTokens, gatewayFixture, postJson } from '../support/fixtures.js';
import { newKeyPem } from '../support/assertion-keys.js';
import { assertionUpstream, type AssertionUpstream } from '../support/assertion-upstream.js';
import { writeGroups } from '../support/authz.js';
import { startCaddy, type Caddy } from './support/caddy.js';
import { startNginx, type Nginx } from './support/nginx.js';

/**
 * The gateway as the forward-auth service of real proxies from Debian: nginx (auth_request,
 * auth_request_set, proxy_set_header) and Caddy (forward_auth, copy_headers), each in front of an
 * upstream that verifies the identity assertion with jose against the gateway's JWK Set. The proxy
 * configurations are the ones docs/authorization.md gives.
 */

let upstream: AssertionUpstream;
let nginx: Nginx;
let caddy: Caddy;

const carol = basic('carol', 'carol-pw');
const dave = basic('dave', 'dave-pw');

/** docs/authorization.md, "nginx" (ports filled in). */
export function nginxForwardAuth(port: number, gateway: string, upstreamUrl: string): string {
  return `
  server {
    listen 127.0.0.1:${port};

    location = /_gateway_auth {
      internal;
      proxy_pass ${gateway}/auth/verify;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-Method $request_method;
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header X-Forwarded-Host $host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      # Only nginx describes the request: client-sent copies of the other pair are dropped.
      proxy_set_header X-Forwarded-Method "";
      proxy_set_header X-Forwarded-Uri "";
    }

    location / {
      auth_request /_gateway_auth;
      auth_request_set $gw_user $upstream_http_x_authenticated_user;
      auth_request_set $gw_via $upstream_http_x_authenticated_via;
      auth_request_set $gw_groups $upstream_http_x_authenticated_groups;
      auth_request_set $gw_assertion $upstream_http_x_identity_assertion;
      proxy_set_header X-Authenticated-User $gw_user;
      proxy_set_header X-Authenticated-Via $gw_via;
      proxy_set_header X-Authenticated-Groups $gw_groups;
      proxy_set_header X-Identity-Assertion $gw_assertion;
      proxy_set_header Authorization "";
      proxy_pass ${upstreamUrl};
    }
  }`;
}

/** docs/authorization.md, "Caddy" (ports filled in). */
export function caddyForwardAuth(port: number, gateway: string, upstreamUrl: string): string {
  return `http://127.0.0.1:${port} {
	route {
		forward_auth ${gateway.replace(/^http:\/\//, '')} {
			uri /auth/verify
			header_up -X-Original-Method
			header_up -X-Original-URI
			copy_headers X-Authenticated-User X-Authenticated-Via X-Authenticated-Groups X-Identity-Assertion
		}
		request_header -Authorization
		reverse_proxy ${upstreamUrl.replace(/^http:\/\//, '')}
	}
}`;
}

const gw = gatewayFixture({
  users: { carol: 'carol-pw', dave: 'dave-pw' },
  echo: false,
  before: async (f) => {
    writeGroups(f.users.dir, { staff: ['carol'], admins: [] });
    writeFileSync(join(f.users.dir, 'assertion-key.pem'), newKeyPem('ES256'));
    upstream = await assertionUpstream({ jwksUrl: () => `${f.base}${JWKS_PATH}`, audience: 'reports', alg: 'ES256' });
  },
  config: (f) => ({
    // The proxy in front is the gateway's client: its X-Forwarded-For names the real one.
    server: { host: '127.0.0.1', port: 0, trustProxy: 1 },
    users: { htpasswd: f.users.file, groups: join(f.users.dir, 'users.groups'), watch: false },
    forwardAuth: { path: '/auth/verify' },
    identity: { assertion: { keyFile: join(f.users.dir, 'assertion-key.pem') } },
    routes: [
      // No upstream: the proxies in front forward; the gateway only answers about these paths.
      { path: '/v1/reports', audience: 'reports', allow: { groups: ['staff'] } },
      { path: '/v1/admin', audience: 'reports', allow: { groups: ['admins'] } },
      { path: '/v1/limited', audience: 'reports', rateLimit: { requests: 1, windowSeconds: 60 } },
    ],
  }),
  after: () => upstream?.close(),
});

beforeAll(async () => {
  nginx = await startNginx((port) => nginxForwardAuth(port, gw.base, upstream.url));
  caddy = await startCaddy((port) => caddyForwardAuth(port, gw.base, upstream.url));
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
  it('Caddy passes a 429 and its Retry-After on; nginx\'s auth_request knows only 2xx, 401 and 403, and answers 500', async () => {
    await fetch(`http://127.0.0.1:${caddy.port}/v1/limited`, { headers: { authorization: dave } });
    const limited = await fetch(`http://127.0.0.1:${caddy.port}/v1/limited`, { headers: { authorization: dave } });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${nginx.port}/v1/limited`, { headers: { authorization: dave } })).status).toBe(500);
  });
});
