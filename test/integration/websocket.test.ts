import { createServer, type IncomingMessage } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import type { RedisSessionStore } from '../../src/stores/sessions/redis-session-store.js';
import { BEARER_PROTOCOL_PREFIX } from '../../src/proxy/websocket-protocol.js';
import { basic, createTokens, gatewayFixture, jwtPayload, postJson, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';
import { exchangeUntilClosed, openRaw } from '../support/raw-client.js';
import { waitUntil } from '../support/poll.js';

/**
 * WebSocket through the gateway with the `ws` package on both ends: a real WebSocket server as the
 * upstream (it echoes, and records each handshake it accepted), a real client.
 */

interface WsUpstream {
  url: string;
  handshakes: IncomingMessage[];
  sockets: Set<WebSocket>;
  close(): Promise<void>;
}

async function wsUpstream(): Promise<WsUpstream> {
  const server = createServer((_req, res) => res.end('plain http'));
  const wss = new WebSocketServer({ server, handleProtocols: (protocols) => [...protocols][0] ?? false });
  const up: WsUpstream = { url: '', handshakes: [], sockets: new Set(), close: async () => {} };
  wss.on('connection', (ws, req) => {
    up.handshakes.push(req);
    up.sockets.add(ws);
    ws.on('message', (data, binary) => ws.send(binary ? data : `echo:${data.toString()}`, { binary }));
    ws.on('close', () => up.sockets.delete(ws));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  up.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  up.close = () => new Promise((resolve) => {
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return up;
}

interface Refused {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

/** Opens a client; resolves with it once open, or rejects with the refusal (status, headers, body). */
function open(url: string, options: { headers?: Record<string, string>; protocols?: string[] } = {}): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols ?? [], { headers: options.headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode!, headers: res.headers, body })));
    });
    ws.once('error', (err) => reject(err));
  });
}

async function refusal(p: Promise<WebSocket>): Promise<Refused> {
  try {
    const ws = await p;
    ws.terminate();
  } catch (err) {
    return err as Refused;
  }
  throw new Error('the upgrade was accepted');
}

function expectProblem(r: Refused, status: number, code: string): void {
  expect(r.status, r.body).toBe(status);
  expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(JSON.parse(r.body)).toMatchObject({ status, code });
}

const nextMessage = (ws: WebSocket) => new Promise<string>((resolve) => ws.once('message', (d) => resolve(d.toString())));
const closed = (ws: WebSocket) => new Promise<number>((resolve) => {
  if (ws.readyState === WebSocket.CLOSED) resolve(1006);
  ws.once('close', (code) => resolve(code));
});
const bearerEntry = (token: string) => `${BEARER_PROTOCOL_PREFIX}${Buffer.from(token).toString('base64url')}`;

/** The open-tunnels gauge of one upstream, as a scrape reads it (its value is read at collection). */
async function openTunnels(gateway: RunningGateway['gateway'], upstream: string): Promise<number | undefined> {
  const metric = await gateway.metrics.registry.getSingleMetric('auth_gateway_websocket_tunnels')!.get();
  return metric.values.find((v) => v.labels.upstream === upstream)?.value;
}


const USERS = { alice: 'alice-pw', bob: 'bob-pw' };
let up: WsUpstream;

beforeAll(async () => {
  up = await wsUpstream();
});
afterAll(() => up.close());

describe('WebSocket on the memory store', () => {
  const gw = gatewayFixture({
    users: USERS,
    config: (f) => ({
      tokens: { signing: { alg: 'HS256', secret: 'test-secret-test-secret-test-secret-0123456789' }, accessTtlSeconds: 2, refreshTtlSeconds: 60 },
      upstreams: { ws: { url: up.url }, plain: { url: f.echo.url }, down: { url: 'http://127.0.0.1:1', timeoutMs: 1000 } },
      routes: [
        { path: '/v1/live', upstream: 'ws' },
        { path: '/v1/limited', upstream: 'ws', rateLimit: { requests: 1, windowSeconds: 60 } },
        { path: '/v1/nows', upstream: 'ws', websocket: false },
        { path: '/v1/plain', upstream: 'plain' },
        { path: '/v1/down', upstream: 'down' },
      ],
    }),
  });
  let ws: string;
  const clients: WebSocket[] = [];
  const track = (w: WebSocket) => (clients.push(w), w);

  beforeAll(() => {
    ws = `ws://127.0.0.1:${gw.port}`;
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.terminate();
  });

  it('opens with Basic: messages pass both ways; the upstream gets the identity headers, not Authorization', async () => {
    const client = track(await open(`${ws}/v1/live/room?x=1`, { headers: { authorization: basic('alice', 'alice-pw'), 'x-request-id': 'ws-basic-1' } }));
    client.send('hello');
    expect(await nextMessage(client)).toBe('echo:hello');
    const hs = up.handshakes.at(-1)!;
    expect(hs.url).toBe('/v1/live/room?x=1');
    expect(hs.headers['x-authenticated-user']).toBe('alice');
    expect(hs.headers['x-authenticated-via']).toBe('basic');
    expect(hs.headers['x-request-id']).toBe('ws-basic-1');
    expect(hs.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(hs.headers.authorization).toBeUndefined();
    // A binary frame larger than one TCP segment arrives whole.
    const big = Buffer.alloc(256 * 1024, 7);
    client.send(big);
    const back = await new Promise<Buffer>((resolve) => client.once('message', (d) => resolve(d as Buffer)));
    expect(back.equals(big)).toBe(true);
  });

  it('the open-tunnels gauge follows real tunnels, by upstream', async () => {
    const gauge = async () => await openTunnels(gw.gateway, 'ws') ?? 0;
    // The tunnels of earlier tests (their clients terminated) finish closing first.
    await expect.poll(gauge, { timeout: 2000 }).toBe(0);
    const client = track(await open(`${ws}/v1/live`, { headers: { authorization: basic('alice', 'alice-pw') } }));
    client.send('x');
    await nextMessage(client);
    expect(await gauge()).toBe(1);
    client.close();
    await expect.poll(gauge, { timeout: 2000 }).toBe(0);
  });

  it('opens with a bearer token in Authorization', async () => {
    const { accessToken } = await createTokens(gw.base, 'bob', 'bob-pw');
    const client = track(await open(`${ws}/v1/live`, { headers: { authorization: `Bearer ${accessToken}` } }));
    client.send('hi');
    expect(await nextMessage(client)).toBe('echo:hi');
    expect(up.handshakes.at(-1)!.headers['x-authenticated-via']).toBe('bearer');
  });

  it('opens with the token as a subprotocol entry (browsers): the upstream sees only the real subprotocol', async () => {
    const { accessToken } = await createTokens(gw.base, 'bob', 'bob-pw');
    const client = track(await open(`${ws}/v1/live`, { protocols: [bearerEntry(accessToken), 'chat.v1'] }));
    expect(client.protocol).toBe('chat.v1');
    const hs = up.handshakes.at(-1)!;
    expect(hs.headers['sec-websocket-protocol']).toBe('chat.v1');
    expect(hs.headers.authorization).toBeUndefined();
    expect(JSON.stringify(hs.headers)).not.toContain(accessToken);
    expect(hs.headers['x-authenticated-user']).toBe('bob');
  });

  it('refuses a token entry without a real subprotocol, two token entries, and a token entry with Authorization (400)', async () => {
    const { accessToken } = await createTokens(gw.base, 'bob', 'bob-pw');
    expectProblem(await refusal(open(`${ws}/v1/live`, { protocols: [bearerEntry(accessToken)] })), 400, 'invalid_request');
    expectProblem(await refusal(open(`${ws}/v1/live`, { protocols: [bearerEntry(accessToken), bearerEntry(`${accessToken}x`), 'chat'] })), 400, 'invalid_request');
    expectProblem(await refusal(open(`${ws}/v1/live`, { protocols: [bearerEntry(accessToken), 'chat'], headers: { authorization: basic('bob', 'bob-pw') } })), 400, 'invalid_request');
    expectProblem(await refusal(open(`${ws}/v1/live`, { protocols: [`${BEARER_PROTOCOL_PREFIX}bm90LWNhbm9uaWNhbB`, 'chat'] })), 400, 'invalid_request');
  });

  it('refuses without credentials, with a wrong password or a bad token (401 with challenges); nothing reaches the upstream', async () => {
    const before = up.handshakes.length;
    const none = await refusal(open(`${ws}/v1/live`));
    expectProblem(none, 401, 'missing_credentials');
    expect(String(none.headers['www-authenticate'])).toMatch(/Basic realm="auth-gateway"/);
    expect(none.headers['x-request-id']).toBeTruthy();
    expectProblem(await refusal(open(`${ws}/v1/live`, { headers: { authorization: basic('alice', 'wrong') } })), 401, 'invalid_credentials');
    expectProblem(await refusal(open(`${ws}/v1/live`, { headers: { authorization: 'Bearer nope' } })), 401, 'invalid_token');
    expectProblem(await refusal(open(`${ws}/v1/live`, { protocols: [bearerEntry('nope'), 'chat'] })), 401, 'invalid_token');
    expect(up.handshakes.length).toBe(before);
  });

  it('answers 404 for paths without a route, 400 for a bad path, 403 on a route with websocket: false (plain requests there still pass)', async () => {
    const auth = { headers: { authorization: basic('alice', 'alice-pw') } };
    expectProblem(await refusal(open(`${ws}/v1/nothing`, auth)), 404, 'not_found');
    expectProblem(await refusal(open(`${ws}/v1/live/%2e%2e%2f`, auth)), 400, 'invalid_path');
    expectProblem(await refusal(open(`${ws}/v1/nows`, auth)), 403, 'websocket_not_allowed');
    const plain = await fetch(`${gw.base}/v1/nows`, auth);
    expect(plain.status).toBe(200);
  });

  it('applies the rate limit to upgrades', async () => {
    const first = track(await open(`${ws}/v1/limited`, { headers: { authorization: basic('bob', 'bob-pw') } }));
    expect(first.readyState).toBe(WebSocket.OPEN);
    const second = await refusal(open(`${ws}/v1/limited`, { headers: { authorization: basic('bob', 'bob-pw') } }));
    expectProblem(second, 429, 'rate_limited');
    expect(Number(second.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('relays an upstream that does not switch protocols, and answers 502 for one that is down', async () => {
    const r = await refusal(open(`${ws}/v1/plain`, { headers: { authorization: basic('alice', 'alice-pw') } }));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ url: '/v1/plain', headers: { 'x-authenticated-user': 'alice' } });
    expectProblem(await refusal(open(`${ws}/v1/down`, { headers: { authorization: basic('alice', 'alice-pw') } })), 502, 'bad_gateway');
  });

  it('closes the tunnel within a second of the session\'s revocation', async () => {
    const { accessToken } = await createTokens(gw.base, 'bob', 'bob-pw');
    const client = track(await open(`${ws}/v1/live`, { headers: { authorization: `Bearer ${accessToken}` } }));
    await waitUntil(() => up.sockets.size > 0);
    const upstreamCount = up.sockets.size;
    const ended = closed(client);
    const started = Date.now();
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: accessToken, type: 'ACCESS_TOKEN' })).status).toBe(200);
    await ended;
    expect(Date.now() - started).toBeLessThan(1000);
    // The upstream side is closed too.
    await waitUntil(() => up.sockets.size < upstreamCount);
  });

  it('closes the tunnel when its access token expires', async () => {
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    const exp = (jwtPayload(accessToken) as { exp: number }).exp;
    const client = track(await open(`${ws}/v1/live`, { protocols: [bearerEntry(accessToken), 'chat'] }));
    await closed(client);
    const lateBy = Date.now() - exp * 1000;
    expect(lateBy).toBeGreaterThanOrEqual(-50);
    expect(lateBy).toBeLessThan(1000);
  });

  it('a client that leaves closes the upstream side, and an upstream that leaves closes the client', async () => {
    const auth = { headers: { authorization: basic('alice', 'alice-pw') } };
    const a = track(await open(`${ws}/v1/live`, auth));
    await waitUntil(() => up.sockets.size > 0);
    const count = up.sockets.size;
    a.terminate();
    await waitUntil(() => up.sockets.size === count - 1);

    const b = track(await open(`${ws}/v1/live`, auth));
    await waitUntil(() => up.sockets.size === count);
    const ended = closed(b);
    for (const s of up.sockets) s.close(1000, 'bye');
    expect(await ended).toBe(1000);
  });

  it('survives garbage upgrades: a POST handshake, an h2c offer with a body, a socket that leaves mid-handshake; /healthz still answers', async () => {
    const raw = (text: string) => exchangeUntilClosed(gw.port, text);
    const post = await raw('POST /v1/live HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n');
    expect(post).toMatch(/^HTTP\/1\.1 400 /);
    expect(post).toContain('"code":"invalid_request"');
    // Another upgrade with a body: Node stopped parsing at the headers, so it cannot be served.
    const h2c = await raw('POST /v1/live HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nContent-Length: 5\r\n\r\nhello');
    expect(h2c).toMatch(/^HTTP\/1\.1 400 /);
    expect(h2c).toContain('"code":"invalid_request"');
    const leaving = await openRaw(gw.port);
    leaving.socket.write(`GET /v1/live HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: ${basic('alice', 'alice-pw')}\r\n\r\n`);
    leaving.socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    expect((await fetch(`${gw.base}/healthz`)).status).toBe(200);
  });
});

describe('other upgrades (h2c)', () => {
  const gw = gatewayFixture({
    users: USERS,
    log: 'info',
    config: (f) => ({
      upstreams: { plain: { url: f.echo.url } },
      routes: [{ path: '/v1/plain', upstream: 'plain' }],
      log: { level: 'info', access: true },
    }),
  });

  it('are served as plain HTTP/1.1 requests to the end: forwarded, answered, logged, the connection closed', async () => {
    const answer = await exchangeUntilClosed(gw.port,
      `GET /v1/plain HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nAuthorization: ${basic('alice', 'alice-pw')}\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(answer).toContain('"x-authenticated-user":"alice"');
    // The request finished inside the gateway too (its access line is written after the response).
    await waitUntil(() => gw.logs.some((l) => l.includes('"msg":"request"') && l.includes('"path":"/v1/plain"')));
  });
});

describe('WebSocket tunnels per upstream (maxTunnels)', () => {
  /** An upstream that holds each handshake until told how to answer it (a slow WebSocket service). */
  const held: import('node:net').Socket[] = [];
  let holding: import('node:http').Server;
  let holdingUrl = '';
  const gw = gatewayFixture({
    users: USERS,
    echo: false,
    log: 'warn',
    before: async () => {
      holding = createServer((_req, res) => res.end('plain'));
      holding.on('upgrade', (_req, socket) => held.push(socket as import('node:net').Socket));
      await new Promise<void>((resolve) => holding.listen(0, '127.0.0.1', resolve));
      holdingUrl = `http://127.0.0.1:${(holding.address() as { port: number }).port}`;
    },
    after: () => new Promise<void>((resolve) => {
      for (const s of held) s.destroy();
      holding.close(() => resolve());
    }),
    config: () => ({
      upstreams: { ws: { url: up.url, maxTunnels: 2 }, other: { url: up.url }, slow: { url: holdingUrl, maxTunnels: 1 } },
      routes: [{ path: '/v1/live', upstream: 'ws' }, { path: '/v1/other', upstream: 'other' }, { path: '/v1/slow', upstream: 'slow' }],
    }),
  });
  const auth = { authorization: basic('alice', 'alice-pw') };
  const clients: WebSocket[] = [];
  const track = (w: WebSocket) => (clients.push(w), w);
  afterEach(() => {
    for (const c of clients.splice(0)) c.terminate();
  });

  it('past maxTunnels open to an upstream, a handshake gets 503 with Retry-After before anything is sent upstream; another upstream is not limited; a place freed is taken again', async () => {
    const url = `ws://127.0.0.1:${gw.port}`;
    const first = track(await open(`${url}/v1/live`, { headers: auth }));
    track(await open(`${url}/v1/live`, { headers: auth }));
    const seen = up.handshakes.length;
    const refused = await refusal(open(`${url}/v1/live`, { headers: auth }));
    expectProblem(refused, 503, 'service_unavailable');
    expect(refused.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused.body).detail).toContain('(2)');
    expect(up.handshakes.length).toBe(seen);
    // Logged once for the burst, with the counts.
    await refusal(open(`${url}/v1/live`, { headers: auth }));
    const warnings = gw.logs.filter((l) => l.includes('websocket handshake refused'));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]!)).toMatchObject({ upstream: 'ws', maxTunnels: 2, open: 2, opening: 0 });
    // The limit is the upstream's: a third tunnel to another upstream opens.
    const elsewhere = track(await open(`${url}/v1/other`, { headers: auth }));
    elsewhere.send('x');
    expect(await nextMessage(elsewhere)).toBe('echo:x');
    // One closes: its place is free again.
    first.close();
    const openToWs = async () => await openTunnels(gw.gateway, 'ws');
    await expect.poll(openToWs, { timeout: 2000 }).toBe(1);
    const again = track(await open(`${url}/v1/live`, { headers: auth }));
    again.send('y');
    expect(await nextMessage(again)).toBe('echo:y');
  });

  it('a handshake the upstream has not answered yet holds its place; a refusal by the upstream gives it back', async () => {
    const url = `ws://127.0.0.1:${gw.port}`;
    const pending = new WebSocket(`${url}/v1/slow`, { headers: auth });
    track(pending);
    const answered = new Promise<number>((resolve) => pending.once('unexpected-response', (_req, res) => resolve(res.statusCode!)));
    pending.on('error', () => {});
    await waitUntil(() => held.length === 1);
    // The upstream is still thinking: the one place is taken.
    expectProblem(await refusal(open(`${url}/v1/slow`, { headers: auth })), 503, 'service_unavailable');
    expect(held).toHaveLength(1);
    // It answers without switching: the client gets that answer and the place is free.
    held[0]!.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    expect(await answered).toBe(404);
    const next = new WebSocket(`${url}/v1/slow`, { headers: auth });
    track(next);
    next.on('error', () => {});
    let nextStatus = 0;
    next.once('unexpected-response', (_req, res) => (nextStatus = res.statusCode!));
    await waitUntil(() => held.length === 2 || nextStatus !== 0);
    expect(nextStatus).toBe(0);
  });
});

describe('WebSocket and graceful shutdown', () => {
  const f = gatewayFixture({ users: USERS, echo: false, gateway: false });

  it('counts open tunnels: close() waits for them up to the grace period, then ends them', async () => {
    const gw = await startGateway(testConfig(f.users.file, { upstreams: { ws: { url: up.url } }, routes: [{ path: '/v1/live', upstream: 'ws' }] }));
    const client = await open(`ws://127.0.0.1:${gw.port}/v1/live`, { headers: { authorization: basic('alice', 'alice-pw') } });
    const ended = closed(client);
    const started = Date.now();
    let closedAt = 0;
    const closing = gw.gateway.close(600).then(() => (closedAt = Date.now()));
    // Still open and working during the grace period.
    await new Promise((r) => setTimeout(r, 200));
    expect(closedAt).toBe(0);
    client.send('still here');
    expect(await nextMessage(client)).toBe('echo:still here');
    await ended;
    await closing;
    expect(closedAt - started).toBeGreaterThanOrEqual(550);
    expect(closedAt - started).toBeLessThan(2000);
  });

  it('a tunnel that ends during the grace period lets the shutdown finish early', async () => {
    const gw = await startGateway(testConfig(f.users.file, { upstreams: { ws: { url: up.url } }, routes: [{ path: '/v1/live', upstream: 'ws' }] }));
    const client = await open(`ws://127.0.0.1:${gw.port}/v1/live`, { headers: { authorization: basic('alice', 'alice-pw') } });
    const started = Date.now();
    const closing = gw.gateway.close(5000);
    setTimeout(() => client.close(1000), 100);
    await closing;
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe('WebSocket on a shared Redis store', () => {
  const f = gatewayFixture({ users: USERS, echo: false, gateway: false, redis: true });
  let a: RunningGateway;
  let b: RunningGateway;

  beforeAll(async () => {
    const config = () => testConfig(f.users.file, {
      store: { kind: 'redis', url: f.redis.url },
      upstreams: { ws: { url: up.url } },
      routes: [{ path: '/v1/live', upstream: 'ws' }],
    });
    a = await startGateway(config());
    b = await startGateway(config());
    await waitUntil(() => (a.gateway.store as RedisSessionStore).liveness.enabled && (b.gateway.store as RedisSessionStore).liveness.enabled, 5000);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('a revocation through another instance closes the tunnel within a second', async () => {
    const { accessToken } = await createTokens(a.base, 'bob', 'bob-pw');
    const client = await open(`ws://127.0.0.1:${a.port}/v1/live`, { headers: { authorization: `Bearer ${accessToken}` } });
    client.send('x');
    expect(await nextMessage(client)).toBe('echo:x');
    const ended = closed(client);
    const started = Date.now();
    expect((await postJson(b.base, '/v1/tokens/revoke', { token: accessToken, type: 'ACCESS_TOKEN' })).status).toBe(200);
    await ended;
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

