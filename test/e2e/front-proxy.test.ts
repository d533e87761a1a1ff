import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { SESSION_PURPOSE } from '../../src/auth/cookie-session.js';
import { Sealer } from '../../src/auth/seal.js';
import type { Config } from '../../src/config/types.js';
import { REMOVED_HEADERS } from '../../src/core/header-table.js';
import { recipe } from '../../src/recipes/recipes.js';
import { underscoreSpellings } from '../../src/recipes/site.js';
import { derivedKey, loadKeys } from '../../src/tokens/keys.js';
import { basic, echoUpstream, htpasswd, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { signingKey, TestCa, TestProvider } from '../support/oidc-provider.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { waitForHttp } from '../support/process.js';
import { startCaddy, type Caddy } from './support/caddy.js';
import { startNginx, type Nginx } from './support/nginx.js';
import { requireTool, run } from './support/tools.js';
import { loadRecipeConfig } from '../../src/cli/config.js';

/**
 * The front door as deployed: real nginx and Caddy from Debian, each running the configuration
 * `auth-gateway recipe` generates from the gateway's own (nothing edited), in front of a real upstream,
 * with Basic, Bearer, API keys and browser sign-in. Whatever a client sends, the upstream never receives
 * a credential, the gateway's session cookie or a header of the gateway's table of removed headers; and
 * every refusal reaches the client as the gateway writes it when it proxies itself.
 */

let ca: TestCa;
let provider: TestProvider;
let redis: TestRedis;
let users: Users;
let echo: EchoUpstream;
let gw: RunningGateway;
let config: Config;
let nginx: Nginx;
let caddy: Caddy;
let live: Server;
let sessionCookie: string;
const keys: Record<string, string> = {};
const limited: Record<string, string> = {};

const FRONTS = ['gateway', 'nginx', 'Caddy'] as const;
type Front = (typeof FRONTS)[number];
const base = (front: Front) => front === 'gateway' ? gw.base : `http://127.0.0.1:${front === 'nginx' ? nginx.port : caddy.port}`;

beforeAll(async () => {
  ca = new TestCa();
  [provider, echo, redis] = await Promise.all([
    TestProvider.start(ca, { keys: [signingKey('rsa')], resources: {}, clients: [{ client_id: 'gateway', client_secret: 's', grant_types: ['authorization_code'], response_types: ['code'], redirect_uris: ['https://app.example.com/auth/callback'] }] }),
    echoUpstream(),
    startRedis(),
  ]);
  // A WebSocket upstream that greets with the identity it was handed, then echoes.
  live = createServer();
  new WebSocketServer({ server: live }).on('connection', (socket, req) => {
    socket.send(`hello ${String(req.headers['x-authenticated-user'])} ${req.headers.authorization === undefined ? 'without' : 'with'} Authorization`);
    socket.on('message', (m) => socket.send(`echo ${String(m)}`));
  });
  await new Promise<void>((resolve) => live.listen(0, '127.0.0.1', resolve));
  users = htpasswd({ carol: 'carol-password', erin: 'erin-password' });
  const groups = join(users.dir, 'users.groups');
  writeFileSync(groups, 'admins: erin\n');
  config = testConfig(users.file, {
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 500, trustProxy: 1 },
    store: { kind: 'redis', url: redis.url, commandTimeoutMs: 500 },
    users: { htpasswd: users.file, groups, watch: false },
    apiKeys: {},
    identity: { issuers: [{ name: 'corp', issuer: provider.issuer, audiences: ['api'], caFile: ca.caFile }] },
    login: { issuer: 'corp', clientId: 'gateway', clientSecret: 's' },
    forwardAuth: { path: '/auth/verify', trustedProxies: ['127.0.0.1'] },
    upstreams: { app: { url: echo.url }, live: { url: `http://127.0.0.1:${(live.address() as { port: number }).port}` } },
    routes: [
      { path: '/api', upstream: 'app', login: true },
      { path: '/api/admin', upstream: 'app', allow: { groups: ['admins'] } },
      { path: '/api/items', upstream: 'app', paging: { sizes: [10, 20], defaultSize: 10 } },
      { path: '/live', upstream: 'live' },
    ],
  });
  gw = await startGateway(config);
  await waitForHttp(`${gw.base}/readyz`);
  const sid = await gw.gateway.store.createSession({ sub: 'alice', uv: 'oidc' }, 600);
  const sealer = new Sealer(derivedKey(config.tokens.refreshSecret, loadKeys(config.tokens).signing.key, 'sign-in cookies v1'));
  sessionCookie = `__Host-gateway=${sealer.seal(SESSION_PURPOSE, { sid, user: 'alice', groups: ['staff'], exp: Math.floor(Date.now() / 1000) + 600 })}`;
  for (const front of FRONTS) {
    keys[front] = (await gw.gateway.apiKeys!.create({ name: `bot-${front}` }, 'agk')).key;
    // A key of its own per front, so each front's count starts at 0.
    limited[front] = (await gw.gateway.apiKeys!.create({ name: `limited-${front}`, rate: { requests: 2, windowSeconds: 600 } }, 'agk')).key;
  }
  const gateway = gw.base;
  nginx = await startNginx((port) => recipe('nginx', config, { listen: `127.0.0.1:${port}`, gateway }, 'test').text);
  caddy = await startCaddy((port) => recipe('caddy', config, { listen: `127.0.0.1:${port}`, gateway }, 'test').text);
}, 60_000);

afterAll(async () => {
  await nginx?.stop();
  await caddy?.stop();
  await gw?.close();
  await echo?.close();
  live?.closeAllConnections();
  live?.close();
  await provider?.close();
  await redis?.destroy();
  users?.remove();
  ca?.remove();
});

/**
 * Every header of the table as a client could send it: each name and family member, with `_` for all its
 * `-` and for the first (all spellings at once would pass the gateway's header size limit).
 */
function forgedHeaders(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of REMOVED_HEADERS) {
    if (h.kind === 'credential') continue;
    for (const name of h.family ? h.members ?? [] : [h.name]) {
      out[name] = 'forged';
      const spellings = underscoreSpellings(name);
      for (const spelling of [spellings[0], spellings[spellings.length - 1]]) if (spelling) out[spelling] = 'forged';
    }
  }
  out['X_API_Key'] = 'forged';
  out['X-API_Key'] = 'forged';
  return out;
}

async function send(front: Front, path: string, headers: Record<string, string>, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(`${base(front)}${path}`, { ...init, headers, redirect: 'manual' });
  await res.arrayBuffer().catch(() => undefined);
  return res;
}

/** What the upstream received for the one request to `path`. */
function received(path: string) {
  const seen = echo.received.filter((r) => r.url === path);
  expect(seen).toHaveLength(1);
  return seen[0]!;
}

describe.each(FRONTS)('%s: what reaches the upstream', (front) => {
  const credentials = async (): Promise<Array<[string, Record<string, string>, string]>> => {
    const made = await fetch(`${base(front)}/v1/tokens/create`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ appKey: 'carol', appSecret: 'carol-password' }) });
    expect(made.status).toBe(200);
    const { accessToken } = await made.json() as { accessToken: string };
    return [
      ['basic', { authorization: basic('carol', 'carol-password') }, 'carol'],
      ['bearer', { authorization: `Bearer ${accessToken}` }, 'carol'],
      ['api key header', { 'x-api-key': keys[front]! }, `bot-${front}`],
      ['api key as bearer', { authorization: `Bearer ${keys[front]}` }, `bot-${front}`],
      ['session cookie', { cookie: `theme=dark; ${sessionCookie}; lang=en`, accept: 'text/html' }, 'alice'],
    ];
  };

  it('never a credential, the session cookie or a client-sent header of the table; other cookies arrive', async () => {
    for (const [how, creds, user] of await credentials()) {
      const path = `/api/things/${front}/${how.replace(/ /g, '-')}`;
      const cookie = creds.cookie ?? `theme=dark; ${sessionCookie}; lang=en`;
      const res = await send(front, path, { ...forgedHeaders(), ...creds, cookie });
      expect(res.status, how).toBe(200);
      const r = received(path);
      expect(r.headers['x-authenticated-user'], how).toBe(user);
      expect(r.headers.authorization, how).toBeUndefined();
      expect(r.headers['x-api-key'], how).toBeUndefined();
      expect(r.headers.cookie, how).toBe('theme=dark; lang=en');
      const raw = JSON.stringify(r.rawHeaders);
      expect(raw, how).not.toContain('__Host-gateway');
      // The secret is the key's last 43 characters (the id and the secret may themselves hold `_`).
      expect(raw, how).not.toContain(keys[front]!.slice(-43));
      for (let i = 0; i < r.rawHeaders.length; i += 2) {
        const [name, value] = [r.rawHeaders[i]!.toLowerCase(), r.rawHeaders[i + 1]!];
        // The gateway itself trusts one proxy's X-Forwarded-For (server.trustProxy: 1): sent to it directly,
        // the client is that proxy.
        if (front === 'gateway' && name.startsWith('x-forwarded-')) continue;
        expect(value, `${how}: ${name}`).not.toContain('forged');
      }
    }
  });
});

describe.each(FRONTS)('%s: a WebSocket', (front) => {
  it('opens through the front with the identity, and without credentials is refused with the gateway\'s 401', async () => {
    const url = `${base(front).replace('http', 'ws')}/live/feed`;
    const ws = new WebSocket(url, { headers: { authorization: basic('carol', 'carol-password') } });
    const greeting = await new Promise<string>((resolve, reject) => {
      ws.once('message', (m) => resolve(String(m)));
      ws.once('error', reject);
      ws.once('unexpected-response', (_, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    expect(greeting).toBe('hello carol without Authorization');
    ws.send('ping');
    expect(await new Promise<string>((resolve) => ws.once('message', (m) => resolve(String(m))))).toBe('echo ping');
    ws.close();
    const refused = await new Promise<number>((resolve, reject) => {
      const anonymous = new WebSocket(url);
      anonymous.once('unexpected-response', (_, res) => resolve(res.statusCode ?? 0));
      anonymous.once('open', () => reject(new Error('opened without credentials')));
      anonymous.once('error', () => undefined);
    });
    expect(refused).toBe(401);
  });
});

/** The parts of an answer a client acts on. */
async function answer(front: Front, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base(front)}${path}`, { headers, redirect: 'manual' });
  const text = await res.text();
  const body = res.headers.get('content-type')?.includes('json') ? JSON.parse(text) as Record<string, unknown> : undefined;
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    code: body?.code,
    detail: body?.detail,
    retryAfter: res.headers.get('retry-after') !== null,
    challenges: res.headers.get('www-authenticate'),
  };
}

describe('refusals through each front are the gateway\'s own answers', () => {
  const cases: Array<[string, string, () => Record<string, string>]> = [
    ['401 without credentials', '/api/report', () => ({ accept: 'application/json' })],
    ['401 with a wrong password', '/api/report', () => ({ authorization: basic('carol', 'not-her-password') })],
    ['403 outside the route\'s group', '/api/admin/users', () => ({ authorization: basic('carol', 'carol-password') })],
    ['404 where no route serves', '/favicon.ico', () => ({ authorization: basic('carol', 'carol-password') })],
    ['400 for a paging name variant', '/api/items?SIZE=10', () => ({ authorization: basic('carol', 'carol-password') })],
    ['400 for an API key beside Bearer', '/api/report', () => ({ authorization: 'Bearer x.y.z', 'x-api-key': keys.gateway! })],
    ['400 for an API key beside Basic', '/api/report', () => ({ authorization: basic('carol', 'carol-password'), 'x-api-key': keys.gateway! })],
    ['400 for a trailing dot that IIS would drop into the admin route', '/api/admin./users', () => ({ authorization: basic('carol', 'carol-password') })],
    ['400 for a trailing space that IIS would drop into the admin route', '/api/admin%20/users', () => ({ authorization: basic('carol', 'carol-password') })],
    ['400 for a paging name with a NUL', '/api/items?size%00=10', () => ({ authorization: basic('carol', 'carol-password') })],
  ];
  it.each(cases)('%s', async (_, path, headers) => {
    const direct = await answer('gateway', path, headers());
    expect(direct.status).toBeGreaterThanOrEqual(400);
    for (const front of ['nginx', 'Caddy'] as const) expect(await answer(front, path, headers()), front).toEqual(direct);
  });

  it('a gRPC call without credentials is refused by every front, never let through as the gRPC answer\'s 200', async () => {
    for (const front of ['nginx', 'Caddy'] as const) {
      const before = echo.received.length;
      const res = await fetch(`${base(front)}/api/pkg.Service/Call`, { method: 'POST', headers: { 'content-type': 'application/grpc', te: 'trailers' }, body: new Uint8Array(5) });
      await res.arrayBuffer();
      expect(res.status, front).toBe(401);
      expect(echo.received.length, front).toBe(before);
    }
  });

  it('429 with Retry-After, each request counted once however the front asks', async () => {
    const seen: Record<string, number[]> = {};
    for (const front of FRONTS) {
      seen[front] = [];
      for (let i = 0; i < 3; i++) seen[front].push((await answer(front, `/api/report/${i}`, { 'x-api-key': limited[front]! })).status);
      const refused = await answer(front, '/api/report/3', { 'x-api-key': limited[front]! });
      expect(refused.code).toBe('rate_limited');
      expect(refused.retryAfter).toBe(true);
      expect(refused.contentType).toBe('application/problem+json');
    }
    expect(seen).toEqual({ gateway: [200, 200, 429], nginx: [200, 200, 429], Caddy: [200, 200, 429] });
  });

  it('a browser without a session on a login route is sent to sign in at the provider', async () => {
    for (const front of FRONTS) {
      let at = `${base(front)}/api/page?x=1`;
      let res = await fetch(at, { headers: { accept: 'text/html' }, redirect: 'manual' });
      // Through a front: first to the gateway's sign-in start on the same origin, then on to the provider.
      for (let hops = 0; res.status === 302 && !res.headers.get('location')!.startsWith(provider.issuer) && hops < 3; hops++) {
        at = new URL(res.headers.get('location')!, at).href;
        expect(new URL(at).origin, front).toBe(base(front));
        res = await fetch(at, { headers: { accept: 'text/html' }, redirect: 'manual' });
      }
      expect(res.status, front).toBe(302);
      const authorize = new URL(res.headers.get('location')!);
      expect(authorize.origin, front).toBe(provider.issuer);
      expect(authorize.searchParams.get('redirect_uri'), front).toBe(`${base(front)}/auth/callback`);
    }
  });

  it('503 while the store is down, as the gateway answers it', async () => {
    const made = await fetch(`${gw.base}/v1/tokens/create`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ appKey: 'erin', appSecret: 'erin-password' }) });
    const { accessToken } = await made.json() as { accessToken: string };
    await redis.stop();
    try {
      const headers = { authorization: `Bearer ${accessToken}` };
      const direct = await answer('gateway', '/api/report', headers);
      expect(direct.status).toBe(503);
      expect(direct.code).toBe('store_unavailable');
      for (const front of ['nginx', 'Caddy'] as const) expect(await answer(front, '/api/report', headers), front).toEqual(direct);
    } finally {
      await redis.start();
    }
  });
});

describe('the recipes docs/front-proxy.md prints load in the real programs', () => {
  const example = () => {
    const cwd = process.cwd();
    process.chdir(join(import.meta.dirname, '../..'));
    try {
      return loadRecipeConfig('docs/examples/front-door.yaml');
    } finally {
      process.chdir(cwd);
    }
  };

  it('nginx -t accepts the nginx recipe as a conf.d file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-recipe-nginx-'));
    try {
      writeFileSync(join(dir, 'auth-gateway.conf'), recipe('nginx', example()).text);
      writeFileSync(join(dir, 'nginx.conf'), [
        `pid ${join(dir, 'nginx.pid')};`, `error_log ${join(dir, 'error.log')};`, 'events {}',
        `http { client_body_temp_path ${dir}; proxy_temp_path ${dir}; access_log off; include ${join(dir, 'auth-gateway.conf')}; }`, '',
      ].join('\n'));
      const checked = await run(requireTool('nginx'), ['-t', '-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')]);
      expect(checked.stderr).toContain('test is successful');
      expect(checked.stderr).not.toMatch(/\[(warn|emerg)\]/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('caddy validate accepts the Caddy recipe as a site block', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-recipe-caddy-'));
    try {
      writeFileSync(join(dir, 'Caddyfile'), `{\n\tadmin off\n\tstorage file_system ${join(dir, 'data')}\n}\n\n${recipe('caddy', example()).text}`);
      const checked = await run(requireTool('caddy'), ['validate', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, XDG_DATA_HOME: join(dir, 'xdg'), XDG_CONFIG_HOME: join(dir, 'xdg') },
      });
      expect(`${checked.stdout}${checked.stderr}`).toContain('Valid configuration');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
