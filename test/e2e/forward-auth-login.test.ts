import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_PURPOSE } from '../../src/auth/cookie-session.js';
import { Sealer } from '../../src/auth/seal.js';
import { derivedKey, loadKeys } from '../../src/tokens/keys.js';
import { echoUpstream, htpasswd, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { signingKey, TestCa, TestProvider } from '../support/oidc-provider.js';
import { recipe } from '../../src/recipes/recipes.js';
import { startCaddy, type Caddy } from './support/caddy.js';
import { startNginx, type Nginx } from './support/nginx.js';

/**
 * Forward-auth with sign-in behind real proxies from Debian, configured with what `auth-gateway recipe`
 * generates from the gateway's configuration: a browser navigation without a session is redirected to the
 * gateway's sign-in start (which sends it on to a real OpenID provider), an API call keeps its 401, a
 * session cookie passes with its user.
 */

let ca: TestCa;
let provider: TestProvider;
let users: Users;
let echo: EchoUpstream;
let gw: RunningGateway;
let nginx: Nginx;
let caddy: Caddy;
let cookie: string;

beforeAll(async () => {
  ca = new TestCa();
  [provider, echo] = await Promise.all([
    TestProvider.start(ca, { keys: [signingKey('rsa')], resources: {}, clients: [{ client_id: 'gateway', client_secret: 's', grant_types: ['authorization_code'], response_types: ['code'], redirect_uris: ['https://app.example.com/auth/callback'] }] }),
    echoUpstream(),
  ]);
  users = htpasswd({ bob: 'bob-password' });
  const config = testConfig(users.file, {
    // The proxy in front is the gateway's client: its X-Forwarded-Host and -Proto name the public origin.
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 500, trustProxy: 1 },
    identity: { issuers: [{ name: 'corp', issuer: provider.issuer, audiences: ['api'], caFile: ca.caFile }] },
    login: { issuer: 'corp', clientId: 'gateway', clientSecret: 's' },
    forwardAuth: { path: '/auth/verify', trustedProxies: ['127.0.0.1'] },
    upstreams: { app: { url: echo.url } },
    routes: [{ path: '/app', upstream: 'app', login: true }],
  });
  gw = await startGateway(config);
  // A browser session as the callback makes one: in the store, its handle sealed under the derived key.
  const sid = await gw.gateway.store.createSession({ sub: 'alice', uv: 'oidc' }, 600);
  const sealer = new Sealer(derivedKey(config.tokens.refreshSecret, loadKeys(config.tokens).signing.key, 'sign-in cookies v1'));
  cookie = `__Host-gateway=${sealer.seal(SESSION_PURPOSE, { sid, user: 'alice', groups: ['staff'], exp: Math.floor(Date.now() / 1000) + 600 })}`;
  nginx = await startNginx((port) => recipe('nginx', config, { listen: `127.0.0.1:${port}`, gateway: gw.base }, 'test').text);
  caddy = await startCaddy((port) => recipe('caddy', config, { listen: `127.0.0.1:${port}`, gateway: gw.base }, 'test').text);
}, 60_000);

afterAll(async () => {
  await nginx?.stop();
  await caddy?.stop();
  await gw?.close();
  await echo?.close();
  await provider?.close();
  users?.remove();
  ca?.remove();
});

describe.each(['nginx', 'Caddy'])('%s in front, on the generated recipe', (name) => {
  const base = () => `http://127.0.0.1:${name === 'nginx' ? nginx.port : caddy.port}`;

  it('redirects a browser navigation without a session to the gateway\'s sign-in, which sends it to the provider', async () => {
    const nav = await fetch(`${base()}/app/report?q=1&r=2`, { headers: { accept: 'text/html' }, redirect: 'manual' });
    expect(nav.status).toBe(302);
    const signIn = nav.headers.get('location')!;
    expect(signIn).toBe(`${base()}/auth/callback?rd=%2Fapp%2Freport%3Fq%3D1%26r%3D2`);
    // The sign-in start, through the proxy to the gateway: on to the provider, the callback on the public origin.
    const start = await fetch(signIn, { redirect: 'manual' });
    expect(start.status).toBe(302);
    const authorize = new URL(start.headers.get('location')!);
    expect(authorize.origin).toBe(provider.issuer);
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${base()}/auth/callback`);
    expect(start.headers.get('set-cookie')).toMatch(/^__Host-gateway-login-[A-Za-z0-9_-]{12}=/);
    expect(echo.received.some((r) => r.url.startsWith('/app/report'))).toBe(false);
  });

  it('keeps the 401 for an API call, and lets a session cookie through with its user', async () => {
    const api = await fetch(`${base()}/app/report`, { headers: { accept: 'application/json' }, redirect: 'manual' });
    expect(api.status).toBe(401);
    expect(api.headers.get('location')).toBeNull();
    const ok = await fetch(`${base()}/app/page-${name}`, { headers: { accept: 'text/html', cookie }, redirect: 'manual' });
    expect(ok.status).toBe(200);
    const seen = echo.received.find((r) => r.url === `/app/page-${name}`)!;
    expect(seen.headers['x-authenticated-user']).toBe('alice');
    expect(seen.headers['x-authenticated-groups']).toBe('staff');
  });
});
