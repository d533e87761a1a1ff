import type { Config } from '../../src/config/types.js';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { basic, createTokens, gatewayFixture, testConfig } from '../support/fixtures.js';
import { captureLog, writeGroups } from '../support/authz.js';
import { eventually } from '../support/poll.js';

/**
 * Per-route allow rules (users, groups from an htgroup file, methods) on proxied requests and WebSocket
 * handshakes; 401 stays for credentials, 403 `forbidden` is for rules. Real upstreams, the real gateway.
 */

const log = captureLog();
const wsServer = createServer();
const wsSockets = new Set<WebSocket>();
const wsHandshakes: IncomingMessage[] = [];
new WebSocketServer({ server: wsServer }).on('connection', (ws, req) => {
  wsHandshakes.push(req);
  wsSockets.add(ws);
  ws.on('close', () => wsSockets.delete(ws));
  ws.on('message', (d) => ws.send(`echo:${d.toString()}`));
});

const alice = basic('alice', 'alice-pw');
const bob = basic('bob', 'bob-pw');
const carol = basic('carol', 'carol-pw');

const gw = gatewayFixture({
  users: { alice: 'alice-pw', bob: 'bob-pw', carol: 'carol-pw' },
  before: async (f) => {
    writeGroups(f.users.dir, { admins: ['bob'], staff: ['carol', 'bob'] });
    await new Promise<void>((resolve) => wsServer.listen(0, '127.0.0.1', resolve));
  },
  config: () => settings(),
  deps: () => ({ log }),
  after: async () => {
    for (const ws of wsSockets) ws.terminate();
    wsServer.closeAllConnections();
    await new Promise((resolve) => wsServer.close(resolve));
  },
});

/** The gateway's settings; `live` is the allow rule of the WebSocket route. */
function settings(live: Record<string, unknown> = { groups: ['staff'] }) {
  return {
    users: { htpasswd: gw.users.file, groups: `${gw.users.dir}/users.groups`, watch: true },
    log: { level: 'info', access: true },
    upstreams: { echo: { url: gw.echo.url }, live: { url: `http://127.0.0.1:${(wsServer.address() as { port: number }).port}` } },
    routes: [
      { path: '/v1/reports', upstream: 'echo', allow: { users: ['alice'], groups: ['admins'], methods: ['GET', 'HEAD'] } },
      { path: '/v1/staff', upstream: 'echo', allow: { groups: ['staff'] } },
      { path: '/v1/read-only', upstream: 'echo', allow: { methods: ['GET'] } },
      { path: '/v1/open', upstream: 'echo' },
      { path: '/v1/live', upstream: 'live', allow: live },
    ],
  };
}

/** The gateway's configuration, for a reload. */
function config(live?: Record<string, unknown>) {
  return testConfig(gw.users.file, settings(live));
}

async function get(path: string, authorization?: string, method = 'GET') {
  const res = await fetch(`${gw.base}${path}`, { method, headers: authorization ? { authorization } : {} });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
}

describe('allow rules', () => {
  it('a listed user passes; an unlisted one gets 403 forbidden as a problem body, and the upstream sees nothing', async () => {
    expect((await get('/v1/reports', alice)).status).toBe(200);
    const before = gw.echo.received.length;
    const denied = await get('/v1/reports/7', carol);
    expect(denied.status).toBe(403);
    expect(denied.headers.get('content-type')).toBe('application/problem+json');
    expect(denied.body).toMatchObject({ status: 403, code: 'forbidden', type: 'urn:auth-gateway:problem:forbidden' });
    expect(denied.headers.get('www-authenticate')).toBeNull();
    expect(gw.echo.received.length).toBe(before);
  });

  it('credentials come first: none, or wrong ones, are 401 on a ruled route too', async () => {
    expect((await get('/v1/reports')).status).toBe(401);
    expect((await get('/v1/reports', basic('alice', 'wrong'))).status).toBe(401);
  });

  it('a member of a listed group passes, with its groups sent upstream; others are refused', async () => {
    const ok = await get('/v1/reports', bob);
    expect(ok.status).toBe(200);
    expect(gw.echo.received.at(-1)!.headers['x-authenticated-groups']).toBe('admins,staff');
    expect((await get('/v1/staff', carol)).status).toBe(200);
    expect((await get('/v1/staff', alice)).status).toBe(403);
  });

  it('methods: a listed method passes, another is 403 even for a listed user; HEAD is its own method', async () => {
    expect((await get('/v1/reports', alice, 'HEAD')).status).toBe(200);
    expect((await get('/v1/reports', alice, 'DELETE')).status).toBe(403);
    expect((await get('/v1/read-only', carol)).status).toBe(200);
    expect((await get('/v1/read-only', carol, 'POST')).status).toBe(403);
    expect((await get('/v1/read-only', carol, 'HEAD')).status).toBe(403);
  });

  it('a route without a rule is open to every authenticated user, as before', async () => {
    expect((await get('/v1/open', carol, 'DELETE')).status).toBe(200);
  });

  it('bearer tokens are judged by the same rules', async () => {
    const { accessToken } = await createTokens(gw.base, 'bob', 'bob-pw');
    expect((await get('/v1/reports', `Bearer ${accessToken}`)).status).toBe(200);
    const carolToken = (await createTokens(gw.base, 'carol', 'carol-pw')).accessToken;
    expect((await get('/v1/reports', `Bearer ${carolToken}`)).status).toBe(403);
  });

  it('a client cannot claim groups or an assertion: its X-Authenticated-Groups is replaced, or removed when the user has none', async () => {
    const res = await fetch(`${gw.base}/v1/open`, {
      headers: { authorization: alice, 'x-authenticated-groups': 'admins', 'x-authenticated_groups': 'admins', 'x-identity-assertion': 'forged' },
    });
    expect(res.status).toBe(200);
    const h = gw.echo.received.at(-1)!.headers;
    expect(h['x-authenticated-groups']).toBeUndefined();
    expect(h['x-authenticated_groups']).toBeUndefined();
    // Assertions are off here: the default header name is removed all the same.
    expect(h['x-identity-assertion']).toBeUndefined();
    await fetch(`${gw.base}/v1/open`, { headers: { authorization: carol, 'x-authenticated-groups': 'admins' } });
    expect(gw.echo.received.at(-1)!.headers['x-authenticated-groups']).toBe('staff');
  });

  it('the access line and the metrics show the 403 with its code', async () => {
    log.lines.length = 0;
    expect((await get('/v1/staff', alice)).status).toBe(403);
    expect(await eventually(() => log.lines.some((l) => l.msg === 'request' && l.status === 403))).toBe(true);
    expect(log.lines.find((l) => l.msg === 'request' && l.status === 403)).toMatchObject({ code: 'forbidden', user: 'alice', route: '/v1/staff', path: '/v1/staff' });
    const metrics = await gw.gateway.metrics.registry.metrics();
    expect(metrics).toMatch(/auth_gateway_forbidden_total\{route="\/v1\/staff"\} [1-9]/);
    expect(metrics).toMatch(/auth_gateway_requests_total\{route="\/v1\/staff",method="GET",status_class="4xx",auth="basic",protocol="http\/1\.1"\} [1-9]/);
  });
});

describe('allow rules on WebSocket handshakes', () => {
  function open(authorization: string): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/live`, { headers: { authorization } });
      ws.once('open', () => resolve(ws));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode, body })));
      });
      ws.once('error', reject);
    });
  }

  it('a user outside the rule gets 403 forbidden on the handshake; a member gets a tunnel with its groups', async () => {
    const refused = await open(alice).then(() => undefined, (err: { status: number; body: string }) => err);
    expect(refused?.status).toBe(403);
    expect(JSON.parse(refused!.body)).toMatchObject({ code: 'forbidden' });
    const ws = await open(carol);
    try {
      expect(wsHandshakes.at(-1)!.headers['x-authenticated-groups']).toBe('staff');
    } finally {
      ws.terminate();
    }
  });
});

describe('a configuration reload that changes a rule', () => {
  it('closes the open tunnels it no longer allows, and keeps the others', async () => {
    const open = (authorization: string) => new Promise<WebSocket>((resolve, reject) => {
      const c = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/live`, { headers: { authorization } });
      c.once('open', () => resolve(c));
      c.once('error', reject);
    });
    const carolWs = await open(carol);
    const bobWs = await open(bob);
    const carolClosed = new Promise<number>((resolve) => carolWs.once('close', (code) => resolve(code)));
    try {
      gw.gateway.reload(config({ users: ['bob'] }));
      expect(await Promise.race([carolClosed, new Promise((r) => setTimeout(() => r('still open'), 3000))])).toBe(1006);
      bobWs.send('still here');
      expect(await new Promise<string>((resolve) => bobWs.once('message', (d) => resolve(d.toString())))).toBe('echo:still here');
    } finally {
      bobWs.terminate();
      carolWs.terminate();
      gw.gateway.reload(config());
    }
  });
});

describe('a configuration reload that takes a route away from WebSocket', () => {
  const open = (authorization: string) => new Promise<WebSocket>((resolve, reject) => {
    const c = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/live`, { headers: { authorization } });
    c.once('open', () => resolve(c));
    c.once('error', reject);
  });
  const closed = (ws: WebSocket) => Promise.race([
    new Promise<number>((resolve) => ws.once('close', (code) => resolve(code))),
    new Promise((r) => setTimeout(() => r('still open'), 3000)),
  ]);

  it.each([
    ['websocket: false on the route', (routes: Config['routes']) => routes.map((r) => (r.path === '/v1/live' ? { ...r, websocket: false } : r))],
    ['the route removed', (routes: Config['routes']) => routes.filter((r) => r.path !== '/v1/live')],
  ])('closes the open tunnels on it: %s', async (_what, change) => {
    const ws = await open(carol);
    const ended = closed(ws);
    try {
      const next = config();
      gw.gateway.reload({ ...next, routes: change(next.routes) });
      expect(await ended).toBe(1006);
    } finally {
      ws.terminate();
      gw.gateway.reload(config());
    }
  });
});

// Last: it rewrites the groups file.
describe('the groups file', () => {
  it('is reloaded when it changes: a user removed from a group loses access on the next request, and their open tunnel on that route closes', async () => {
    const ws = await new Promise<WebSocket>((resolve, reject) => {
      const c = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/live`, { headers: { authorization: carol } });
      c.once('open', () => resolve(c));
      c.once('error', reject);
    });
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.send('hello');
    expect(await new Promise<string>((resolve) => ws.once('message', (d) => resolve(d.toString())))).toBe('echo:hello');
    const started = Date.now();
    writeGroups(gw.users.dir, { admins: ['bob'], staff: ['bob'] });
    expect(await eventually(async () => (await get('/v1/staff', carol)).status === 403)).toBe(true);
    // The tunnel is closed as revocation closes them (an abnormal closure: the gateway cannot write a close frame).
    expect(await Promise.race([closed, new Promise((r) => setTimeout(() => r('still open'), 3000))])).toBe(1006);
    // Well before the periodic recheck (5 s): the change itself closed it.
    expect(Date.now() - started).toBeLessThan(2500);
    expect((await get('/v1/staff', bob)).status).toBe(200);
    // A broken file is logged and the groups in force stay.
    writeFileSync(`${gw.users.dir}/users.groups`, 'not a group line\n');
    expect(await eventually(() => log.lines.some((l) => l.msg === 'groups file not reloaded; keeping the previous groups'))).toBe(true);
    expect((await get('/v1/staff', bob)).status).toBe(200);
  });
});
