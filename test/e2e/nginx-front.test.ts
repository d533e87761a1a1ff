import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { gatewayFixture } from '../support/fixtures.js';
import { startNginx, type Nginx } from './support/nginx.js';
import { requireTool, run } from './support/tools.js';

/**
 * nginx as the reverse proxy in front of the gateway (`server.trustProxy: 1`), curl as the client. The
 * client reaches nginx over ::1 or 127.0.0.1, nginx reaches the gateway over 127.0.0.1, so the address
 * nginx reports and the gateway's TCP peer differ: the tests can tell which one the gateway uses.
 */

let front: Nginx;
let curl: string;
let wsServer: Server;
const wsHandshakes: IncomingMessage[] = [];

const gw = gatewayFixture({
  users: { alice: 'alice-pw', carol: 'carol-pw' },
  setupTimeoutMs: 30_000,
  before: async () => {
    curl = requireTool('curl');
    wsServer = createServer();
    new WebSocketServer({ server: wsServer }).on('connection', (ws, req) => {
      wsHandshakes.push(req);
      ws.on('message', (d) => ws.send(`echo:${d.toString()}`));
    });
    await new Promise<void>((resolve) => wsServer.listen(0, '127.0.0.1', resolve));
  },
  config: (f) => ({
    server: { host: '127.0.0.1', port: 0, trustProxy: 1 },
    // An address bursts 3 failures, then one check a minute: slowed for the rest of this test.
    lockout: { maxFailuresPerUser: 100, addressBurst: 3, addressFailuresPerMinute: 1, windowSeconds: 60 },
    upstreams: { echo: { url: f.echo.url }, live: { url: `http://127.0.0.1:${(wsServer.address() as { port: number }).port}` } },
    routes: [{ path: '/v1/echo', upstream: 'echo' }, { path: '/v1/live', upstream: 'live' }],
  }),
  after: async () => {
    wsServer?.closeAllConnections();
    await new Promise((resolve) => wsServer?.close(resolve));
  },
});

// nginx in front, once the gateway listens (stopped before it: after-hooks run in reverse order).
beforeAll(async () => {
  // The usual nginx front-proxy block: the client's Host, X-Forwarded-For with the client appended,
  // and the WebSocket upgrade passed on (nginx's documented map-less form).
  front = await startNginx((port) => `
  server {
    listen 127.0.0.1:${port};
    listen [::1]:${port};
    location /v1/live {
      proxy_pass http://127.0.0.1:${gw.port};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
    }
    location / {
      proxy_pass http://127.0.0.1:${gw.port};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
    }
  }`);
}, 30_000);

afterAll(async () => {
  await front?.stop();
});

/** One request through nginx; `via` is the address the client connects to nginx on. */
async function viaNginx(via: '::1' | '127.0.0.1', path: string, args: string[] = []) {
  const host = via === '::1' ? `[::1]:${front.port}` : `127.0.0.1:${front.port}`;
  const r = await run(curl, ['-sS', '-o', '-', '-w', '\n%{http_code}', ...args, `http://${host}${path}`]);
  if (r.code !== 0) throw new Error(`curl exit ${r.code}: ${r.stderr}`);
  const cut = r.stdout.lastIndexOf('\n');
  return { status: Number(r.stdout.slice(cut + 1)), body: r.stdout.slice(0, cut) };
}

describe('nginx in front of the gateway (trustProxy: 1)', () => {
  it('the upstream receives the chain nginx built, the client-sent part kept on the left, and nginx appended on the right', async () => {
    const r = await viaNginx('::1', '/v1/echo', ['-u', 'alice:alice-pw', '-H', 'X-Forwarded-For: 203.0.113.9']);
    expect(r.status).toBe(200);
    const h = gw.echo.received.at(-1)!.headers;
    // 203.0.113.9: what the client claimed; ::1: the client as nginx saw it; 127.0.0.1: nginx as the gateway saw it.
    expect(h['x-forwarded-for']).toBe('203.0.113.9, ::1, 127.0.0.1');
    expect(h['x-forwarded-proto']).toBe('http');
    expect(h['x-forwarded-host']).toBe(`[::1]:${front.port}`);
    expect(h['x-authenticated-user']).toBe('alice');

    await viaNginx('127.0.0.1', '/v1/echo', ['-u', 'alice:alice-pw']);
    expect(gw.echo.received.at(-1)!.headers['x-forwarded-for']).toBe('127.0.0.1, 127.0.0.1');
  });

  it('a WebSocket through nginx: authenticated at the gateway, the upstream gets the address nginx reported', async () => {
    const ws = await new Promise<WebSocket>((resolve, reject) => {
      const client = new WebSocket(`ws://[::1]:${front.port}/v1/live`, { headers: { authorization: `Basic ${Buffer.from('alice:alice-pw').toString('base64')}` } });
      client.once('open', () => resolve(client));
      client.once('error', reject);
      client.once('unexpected-response', (_req, res) => reject(new Error(`refused ${res.statusCode}`)));
    });
    try {
      ws.send('through nginx');
      expect(await new Promise<string>((resolve) => ws.once('message', (d) => resolve(d.toString())))).toBe('echo:through nginx');
      const h = wsHandshakes.at(-1)!.headers;
      expect(h['x-forwarded-for']).toBe('::1, 127.0.0.1');
      expect(h['x-authenticated-user']).toBe('alice');
      expect(h.authorization).toBeUndefined();
    } finally {
      ws.terminate();
    }
  });

  // Last: it locks out ::1.
  it('the address throttle keys on the address nginx reports: a guessing client is held back whatever X-Forwarded-For it invents, others behind the same nginx are not', async () => {
    for (let i = 0; i < 3; i++) {
      // A fresh invented address each time: only the entry nginx appends (::1) counts.
      const r = await viaNginx('::1', '/v1/echo', ['-u', `guess${i}:wrong`, '-H', `X-Forwarded-For: 198.51.100.${i + 1}`]);
      expect(r.status).toBe(401);
    }
    const locked = await viaNginx('::1', '/v1/echo', ['-u', 'carol:carol-pw', '-H', 'X-Forwarded-For: 198.51.100.77']);
    expect(locked.status).toBe(429);
    expect(JSON.parse(locked.body)).toMatchObject({ code: 'too_many_attempts', status: 429 });
    // Same nginx (the gateway's TCP peer is 127.0.0.1 both times), another client address: not locked.
    const other = await viaNginx('127.0.0.1', '/v1/echo', ['-u', 'carol:carol-pw']);
    expect(other.status).toBe(200);
    const tokens = await viaNginx('127.0.0.1', '/v1/tokens/create', ['-H', 'Content-Type: application/json', '-d', '{"appKey":"carol","appSecret":"carol-pw"}']);
    expect(tokens.status).toBe(200);
    const lockedCreate = await viaNginx('::1', '/v1/tokens/create', ['-H', 'Content-Type: application/json', '-d', '{"appKey":"carol","appSecret":"carol-pw"}']);
    expect(lockedCreate.status).toBe(429);
  });
});
