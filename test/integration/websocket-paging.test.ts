import { createServer, type IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { basic, gatewayFixture } from '../support/fixtures.js';

/**
 * docs/api.md, WebSocket: a handshake goes through the paging step like a GET: on a paged route its
 * size, page and sort are checked (400) and rewritten to the canonical form, and with stripPrefix the
 * upstream gets the rest of the path.
 */

const ALICE = { authorization: basic('alice', 'alice-pw') };
let wsUrls: string[] = [];
let server: ReturnType<typeof createServer>;
let wss: WebSocketServer;
let upstreamUrl = '';

beforeAll(async () => {
  server = createServer((_req, res) => res.end('plain'));
  wss = new WebSocketServer({ server });
  wss.on('connection', (ws, req: IncomingMessage) => {
    wsUrls.push(req.url!);
    ws.close();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  for (const c of wss.clients) c.terminate();
  wss.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const PAGING = { sizes: [10, 50], defaultSize: 10, sortable: ['name'] };
const gw = gatewayFixture({
  config: (f) => ({
    upstreams: { ws: { url: upstreamUrl }, echo: { url: f.echo.url } },
    routes: [
      { path: '/v1/feed', upstream: 'ws', paging: PAGING },
      { path: '/v1/stripped', upstream: 'ws', paging: PAGING, stripPrefix: true },
      { path: '/v1/list', upstream: 'echo', paging: PAGING },
    ],
  }),
});

/** Opens a handshake; the status the gateway answered with when it refused, or 101. */
function handshake(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${gw.port}${path}`, { headers: ALICE });
    ws.once('open', () => {
      ws.terminate();
      resolve({ status: 101, body: '' });
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    ws.once('error', reject);
  });
}

describe('paging on a WebSocket handshake', () => {
  it('rewrites size, page and sort to the canonical form a GET gets', async () => {
    wsUrls = [];
    const query = '?sort=name&size=50';
    expect((await handshake(`/v1/feed/live${query}`)).status).toBe(101);
    const get = await fetch(`${gw.base}/v1/list/live${query}`, { headers: ALICE });
    expect(get.status).toBe(200);
    const canonical = gw.echo.received.at(-1)!.url.replace('/v1/list/live', '');
    expect(canonical).not.toBe(query);
    expect(wsUrls).toEqual([`/v1/feed/live${canonical}`]);
  });

  it('refuses a page size the route does not offer with 400, before anything reaches the upstream', async () => {
    wsUrls = [];
    const r = await handshake('/v1/feed/live?size=999');
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'invalid_page_size' });
    expect(wsUrls).toEqual([]);
  });

  it('with stripPrefix the upstream gets the rest of the path', async () => {
    wsUrls = [];
    expect((await handshake('/v1/stripped/live?size=10')).status).toBe(101);
    expect(wsUrls).toHaveLength(1);
    expect(wsUrls[0]).toMatch(/^\/live\?/);
  });
});
