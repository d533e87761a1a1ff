import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { basic, gatewayFixture } from '../support/fixtures.js';
import { openRaw, requestText } from '../support/raw-client.js';

// Upstreams that misbehave in ways a parser accepts: a status writeHead refuses, an answer before the
// body was read, a TLS port that never answers the handshake. The gateway answers, times out, and lives.

const ALICE = basic('alice', 'alice-pw');
let oddStatus: NetServer;
let early: Server;
let earlyConnections = 0;
let silentTls: NetServer;
const ports = { odd: 0, early: 0, tls: 0 };
const sockets = new Set<Socket>();

const listen = (server: NetServer | Server) => new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));

const gw = gatewayFixture({
  echo: false,
  before: async () => {
    oddStatus = createServer((s) => {
      sockets.add(s);
      s.once('data', () => s.end('HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n'));
    });
    // Answers at once, never reads the body.
    early = createHttpServer((_req, res) => res.end('early'));
    early.on('connection', (s: Socket) => {
      earlyConnections++;
      s.on('close', () => earlyConnections--);
    });
    // Accepts TCP, never speaks TLS.
    silentTls = createServer((s) => {
      sockets.add(s);
      s.on('error', () => {});
    });
    [ports.odd, ports.early, ports.tls] = await Promise.all([listen(oddStatus), listen(early), listen(silentTls)]);
  },
  config: () => ({
    upstreams: {
      odd: { url: `http://127.0.0.1:${ports.odd}` },
      early: { url: `http://127.0.0.1:${ports.early}`, timeouts: { responseMs: 500, idleMs: 600 } },
      tls: { url: `https://127.0.0.1:${ports.tls}`, timeouts: { connectMs: 300, responseMs: 600, idleMs: 1500 } },
    },
    routes: [{ path: '/v1/odd', upstream: 'odd' }, { path: '/v1/early', upstream: 'early' }, { path: '/v1/tls', upstream: 'tls' }],
  }),
  after: async () => {
    for (const s of sockets) s.destroy();
    early?.closeAllConnections();
    await Promise.all([oddStatus, early, silentTls].map((s) => new Promise((r) => s?.close(r))));
  },
});

describe('misbehaving upstreams', () => {
  it('a status below 100 (which writeHead would throw on) is a 502, and the gateway lives', async () => {
    const res = await fetch(`${gw.base}/v1/odd/x`, { headers: { authorization: ALICE }, signal: AbortSignal.timeout(3000) });
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ code: 'bad_gateway', detail: expect.stringMatching(/invalid status/) });
    expect((await fetch(`${gw.base}/healthz`)).status).toBe(200);
  });

  it('an upload that stalls after the upstream already answered is ended on both sides after idleMs', async () => {
    const started = Date.now();
    const client = await openRaw(gw.port);
    client.socket.write(requestText('POST', '/v1/early/x', { Authorization: ALICE, 'Content-Length': 100000 }, 'a'.repeat(10)));
    await client.closed();
    const elapsed = Date.now() - started;
    expect(client.text()).toMatch(/^HTTP\/1\.1 200/);
    expect(elapsed).toBeLessThan(2500);
    await expect.poll(() => earlyConnections, { timeout: 2000 }).toBe(0);
  });

  it('an https target that accepts TCP but never answers the handshake is a 504 after connectMs, not a 408', async () => {
    const started = Date.now();
    const res = await fetch(`${gw.base}/v1/tls/x`, { headers: { authorization: ALICE }, signal: AbortSignal.timeout(5000) });
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ code: 'gateway_timeout', detail: expect.stringMatching(/could not be reached within 300 ms/) });
    expect(Date.now() - started).toBeLessThan(1500);
  });
});
