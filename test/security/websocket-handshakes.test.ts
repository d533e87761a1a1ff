import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { beforeEach, describe, expect, it } from 'vitest';
import { basic, createTokens, gatewayFixture } from '../support/fixtures.js';
import { exchange, handshake, headerOf, openRaw, parseAnswer, rawUpstream, type RawUpstream } from '../support/raw-client.js';

// =============================================================================================
// WebSocket handshakes on raw sockets, one test per finding of the attack pass (issue 15): the
// handshake takes the same pipeline as any request, and the upstream's 101 is checked before a tunnel
// opens. The upstream speaks raw bytes too, so it can answer what a broken or hostile one would.
// =============================================================================================

const ALICE = basic('alice', 'alice-pw');
const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const acceptOf = (key: string) => createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
const GOOD_101 = (key = KEY, extra = '') =>
  `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(key)}\r\n${extra}\r\n`;

let up: RawUpstream;
const gw = gatewayFixture({
  echo: false,
  log: 'info',
  before: async () => {
    up = await rawUpstream();
  },
  config: () => ({
    upstreams: { up: { url: up.url, timeouts: { responseMs: 3000 } } },
    routes: [
      { path: '/v1/list', upstream: 'up', paging: { sizes: [10, 20, 50], sortable: ['createdAt'] } },
      { path: '/v1/star', upstream: 'up', cors: { origins: ['*'] } },
      { path: '/v1/listed', upstream: 'up', cors: { origins: ['https://app.example'] } },
      { path: '/v1', upstream: 'up' },
    ],
    log: { level: 'info', access: true },
  }),
  after: () => up?.close(),
});
/** The gateway's log lines, parsed. */
const logged = () => gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>);

beforeEach(() => {
  up.heads.length = 0;
  // By default the upstream accepts a handshake correctly and then echoes what it gets.
  up.onHead = (head, socket) => {
    const key = headerOf(head, 'sec-websocket-key');
    if (key === undefined) {
      socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
      return;
    }
    socket.write(GOOD_101(key));
    socket.pipe(socket);
  };
});

const answerWith = (bytes: string) => {
  up.onHead = (_head, socket) => socket.write(bytes);
};

describe('a handshake takes the pipeline of every request', () => {
  it('paging: bad values are 400 and never reach the upstream; good ones arrive canonical', async () => {
    const bad = parseAnswer(await exchange(gw.port, handshake('/v1/list?size=200&sort=createdAt,desc', { Authorization: ALICE })));
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ code: 'invalid_page_size' });
    const worse = parseAnswer(await exchange(gw.port, handshake('/v1/list?size=100000&page=-1&sort=passwordHash,asc&size=7', { Authorization: ALICE })));
    expect(worse.status).toBe(400);
    expect(up.heads).toHaveLength(0);

    const c = await openRaw(gw.port);
    c.socket.write(handshake('/v1/list?x=1&sort=createdAt,DESC', { Authorization: ALICE }));
    expect(await c.waitFor(/^HTTP\/1\.1 101 /, 2000)).toBe(true);
    c.socket.destroy();
    expect(up.heads[0]).toMatch(/^GET \/v1\/list\?x=1&size=20&page=0&sort=createdAt%2Cdesc HTTP\/1\.1/);
  });

  it('Location: an upstream redirect to its own address becomes a path on the gateway', async () => {
    answerWith(`HTTP/1.1 302 Found\r\nLocation: ${'http://127.0.0.1'}:${up.port}/internal/x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    const r = parseAnswer(await exchange(gw.port, handshake('/v1/live', { Authorization: ALICE })));
    expect(r.status).toBe(302);
    expect(r.headers.location).toBe('/internal/x');
  });

  it('client-sent identity headers of the whole family are removed (also spelt with _)', async () => {
    const spoof = {
      'Remote-User': 'admin', 'X-Remote-User': 'admin', 'X-Forwarded-User': 'admin', 'X-Auth-User': 'admin',
      'X-Authenticated-Groups': 'admins', 'X-Auth-Request-User': 'admin', 'X-Forwarded-Groups': 'admins', 'X_Forwarded_User': 'admin',
      'Remote_User': 'admin', 'X-Authenticated-User': 'admin',
    };
    const c = await openRaw(gw.port);
    c.socket.write(handshake('/v1/live', { Authorization: ALICE, ...spoof }));
    expect(await c.waitFor(/^HTTP\/1\.1 101 /, 2000), c.text()).toBe(true);
    c.socket.destroy();
    const plain = await exchange(gw.port, `GET /v1/plain HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\n${Object.entries(spoof).map(([n, v]) => `${n}: ${v}\r\n`).join('')}Connection: close\r\n\r\n`);
    expect(parseAnswer(plain).status).toBe(200);
    expect(up.heads).toHaveLength(2);
    for (const head of up.heads) {
      for (const name of Object.keys(spoof)) {
        if (name === 'X-Authenticated-User') expect(headerOf(head, name)).toBe('alice');
        else expect(headerOf(head, name), `${name} in ${head}`).toBeUndefined();
      }
    }
  });

  it('is counted in auth_gateway_requests_total and has an access line (address, user, via, status, code)', async () => {
    const before = await gw.gateway.metrics.registry.getSingleMetricAsString('auth_gateway_requests_total');
    const ok = await openRaw(gw.port);
    ok.socket.write(handshake('/v1/live', { Authorization: ALICE, 'X-Request-Id': 'counted-101' }));
    expect(await ok.waitFor(/^HTTP\/1\.1 101 /, 2000)).toBe(true);
    const refused = parseAnswer(await exchange(gw.port, handshake('/v1/live', { Authorization: basic('alice', 'wrong'), 'X-Request-Id': 'counted-401' })));
    expect(refused.status).toBe(401);
    ok.socket.destroy();
    const after = await gw.gateway.metrics.registry.getSingleMetricAsString('auth_gateway_requests_total');
    const count = (text: string, cls: string, auth: string) =>
      Number(new RegExp(`auth_gateway_requests_total\\{[^}]*route="/v1"[^}]*status_class="${cls}"[^}]*auth="${auth}"[^}]*\\} (\\d+)`).exec(text)?.[1] ?? 0);
    expect(count(after, '1xx', 'basic') - count(before, '1xx', 'basic')).toBe(1);
    expect(count(after, '4xx', 'none') - count(before, '4xx', 'none')).toBe(1);
    const lineOf = (id: string) => logged().find((l) => l.msg === 'request' && l.requestId === id);
    await expect.poll(() => lineOf('counted-101') !== undefined && lineOf('counted-401') !== undefined).toBe(true);
    const [opened, denied] = [lineOf('counted-101'), lineOf('counted-401')];
    expect(opened).toMatchObject({ status: 101, user: 'alice', via: 'basic', address: '127.0.0.1', route: '/v1' });
    expect(denied).toMatchObject({ status: 401, user: 'alice', code: 'invalid_credentials', address: '127.0.0.1' });
    expect(denied!.via).toBeUndefined();
  });
});

describe('the upstream\'s 101 is checked before a tunnel opens', () => {
  const refusedWith502 = async (answer: (key: string) => string, extra: Record<string, string> = {}) => {
    up.onHead = (head, socket) => socket.write(answer(headerOf(head, 'sec-websocket-key') ?? ''));
    const c = await openRaw(gw.port);
    c.socket.write(handshake('/v1/live', { Authorization: ALICE, ...extra }));
    await Promise.race([c.closed(), new Promise((r) => setTimeout(r, 3000))]);
    expect(c.isClosed()).toBe(true);
    const r = parseAnswer(c.text());
    expect(r.status, c.text()).toBe(502);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'bad_gateway' });
    // Nothing the client might send next reaches the upstream as a request of its own.
    expect(up.sockets.at(-1)!.destroyed || up.sockets.at(-1)!.readableEnded).toBe(true);
  };

  it('a wrong Sec-WebSocket-Accept is 502 and closed', () =>
    refusedWith502(() => GOOD_101('AAAAAAAAAAAAAAAAAAAAAA==')));
  it('no Sec-WebSocket-Accept is 502 and closed', () =>
    refusedWith502(() => 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'));
  it('Upgrade: h2c is 502 and closed', () =>
    refusedWith502((key) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(key)}\r\n\r\n`));
  it('a subprotocol the client did not offer is 502 and closed', () =>
    refusedWith502((key) => GOOD_101(key, 'Sec-WebSocket-Protocol: admin\r\n'), { 'Sec-WebSocket-Protocol': 'chat' }));

  it('a correct 101 with an offered subprotocol opens the tunnel: bytes pass both ways', async () => {
    up.onHead = (head, socket) => {
      socket.write(GOOD_101(headerOf(head, 'sec-websocket-key'), 'Sec-WebSocket-Protocol: chat\r\n'));
      socket.pipe(socket);
    };
    const c = await openRaw(gw.port);
    c.socket.write(handshake('/v1/live', { Authorization: ALICE, 'Sec-WebSocket-Protocol': 'chat, other' }));
    expect(await c.waitFor(/^HTTP\/1\.1 101 [^]*\r\n\r\n$/, 2000)).toBe(true);
    c.socket.write('frame-bytes');
    expect(await c.waitFor(/frame-bytes$/, 2000)).toBe(true);
    c.socket.destroy();
  });

  it('a plain request the upstream answers with 101 gets 502 at once', async () => {
    answerWith(GOOD_101());
    const started = performance.now();
    const r = parseAnswer(await exchange(gw.port, `GET /v1/plain HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`));
    expect(r.status).toBe(502);
    expect(performance.now() - started).toBeLessThan(1500);
  });
});

describe('handshakes that must not get through', () => {
  it('a handshake with a body (Content-Length > 0, or Transfer-Encoding) is 400 at once and reaches nobody', async () => {
    for (const framing of [{ 'Content-Length': '77' }, { 'Transfer-Encoding': 'chunked' }] as Array<Record<string, string>>) {
      const started = performance.now();
      const r = parseAnswer(await exchange(gw.port, handshake('/v1/live', { Authorization: ALICE, ...framing }) + '0\r\n\r\n'));
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ code: 'invalid_request' });
      expect(performance.now() - started).toBeLessThan(1500);
    }
    expect(up.heads).toHaveLength(0);
  });

  it('a client that leaves mid-handshake ends the upstream request at once', async () => {
    answerWith('');
    const c = await openRaw(gw.port);
    c.socket.write(handshake('/v1/live', { Authorization: ALICE }));
    await expect.poll(() => up.heads.length).toBe(1);
    const upstreamSide = up.sockets.at(-1)!;
    const gone = new Promise<number>((resolve) => {
      const started = performance.now();
      upstreamSide.once('close', () => resolve(performance.now() - started));
      upstreamSide.once('end', () => resolve(performance.now() - started));
    });
    c.socket.end();
    expect(await Promise.race([gone, new Promise((r) => setTimeout(() => r(Infinity), 3000))])).toBeLessThan(1000);
  });

  it('Basic: no Origin, the gateway\'s own, or one listed by name; never another site, null, or via *', async () => {
    const status = async (target: string, origin?: string, auth = ALICE) => {
      const c = await openRaw(gw.port);
      c.socket.write(handshake(target, { Authorization: auth, ...(origin === undefined ? {} : { Origin: origin }) }));
      await c.waitFor(/\r\n\r\n/, 3000);
      c.socket.destroy();
      return parseAnswer(c.text()).status;
    };
    expect(await status('/v1/live', 'https://evil.example')).toBe(403);
    expect(await status('/v1/live', 'null')).toBe(403);
    expect(await status('/v1/star/x', 'https://evil.example')).toBe(403);
    expect(await status('/v1/listed/x', 'https://evil.example')).toBe(403);
    expect(await status('/v1/live')).toBe(101);
    expect(await status('/v1/live', 'http://127.0.0.1')).toBe(101);
    expect(await status('/v1/listed/x', 'https://app.example')).toBe(101);
    // A bearer token is sent on purpose, never by the browser by itself: another origin is not refused there.
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    expect(await status('/v1/live', 'https://evil.example', `Bearer ${accessToken}`)).toBe(101);
  });
});

describe('tunnels', () => {
  it('a tunnel the client closed is logged as closed by the client, with its user', async () => {
    let upstreamSide: Socket | undefined;
    up.onHead = (head, socket) => {
      upstreamSide = socket;
      socket.write(GOOD_101(headerOf(head, 'sec-websocket-key')));
      // Like a WebSocket server: answers a close frame with one, then drops TCP first.
      socket.on('data', (d: Buffer) => {
        if ((d[0]! & 0x0f) === 0x8) socket.end(Buffer.from([0x88, 0x00]));
      });
    };
    const c = await openRaw(gw.port);
    c.socket.write(handshake('/v1/live', { Authorization: ALICE, 'X-Request-Id': 'closed-by-client' }));
    expect(await c.waitFor(/^HTTP\/1\.1 101 [^]*\r\n\r\n/, 2000)).toBe(true);
    // A masked close frame with no payload.
    c.socket.write(Buffer.from([0x88, 0x80, 1, 2, 3, 4]));
    await c.closed();
    expect(upstreamSide).toBeDefined();
    await expect.poll(() => logged().find((l) => l.msg === 'websocket closed' && l.requestId === 'closed-by-client')).toMatchObject({ reason: 'client closed', user: 'alice', via: 'basic' });
  });
});
