import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { UpstreamConfig } from '../../src/config/types.js';
import { silentLogger } from '../../src/log.js';
import { Forwarder, type ForwardOutcome } from '../../src/proxy/forward.js';
import { closedPort } from '../support/process.js';

/**
 * The Forwarder alone, between a real client and a real upstream socket on loopback: a bare node:http
 * server hands each request to forward() (no gateway, no pipeline), and the outcome it writes is read.
 */
const open: Array<{ close(): void }> = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  open.push({ close: () => server.close() });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })));
}

function upstreamConfig(url: string, responseMs = 2000): UpstreamConfig {
  return {
    url, targets: [url], balance: 'round-robin', cooldownMs: 1000, timeouts: { connectMs: 500, responseMs, idleMs: 2000 },
    preserveHost: false, maxConnections: 8, maxQueued: 8, maxTunnels: 8,
  };
}

/** A front server whose every request the Forwarder sends to `up`; resolves each outcome as it settles. */
async function front(up: UpstreamConfig): Promise<{ url: string; outcomes: ForwardOutcome[]; settled: Promise<void>[] }> {
  const forwarder = new Forwarder({ up }, silentLogger);
  open.push({ close: () => forwarder.close() });
  const outcomes: ForwardOutcome[] = [];
  const settled: Promise<void>[] = [];
  const { url } = await listen((req, res) => {
    const outcome: ForwardOutcome = { requestId: 'request-under-test', problem: undefined, cut: undefined };
    outcomes.push(outcome);
    settled.push(forwarder.forward(req, res, { upstream: 'up', timeouts: up.timeouts, strippedPrefix: undefined }, outcome));
  });
  return { url, outcomes, settled };
}

function get(url: string): Promise<{ status: number; body: string; headers: IncomingMessage['headers'] }> {
  return new Promise((resolve, reject) => {
    request(url, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body, headers: res.headers }));
    }).on('error', reject).end();
  });
}

describe('Forwarder', () => {
  it('streams the upstream\'s answer back, without its hop-by-hop headers, and settles with no problem', async () => {
    const { url: upUrl } = await listen((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', connection: 'keep-alive, x-hop', 'x-hop': 'h', 'keep-alive': 'timeout=5' });
      res.end(JSON.stringify({ path: req.url }));
    });
    const f = await front(upstreamConfig(upUrl));
    const answer = await get(`${f.url}/items?size=10`);
    await Promise.all(f.settled);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ path: '/items?size=10' });
    expect(answer.headers['x-hop']).toBeUndefined();
    expect(f.outcomes[0]).toEqual({ requestId: 'request-under-test', problem: undefined, cut: undefined });
  });

  it('the answer carries the request\'s X-Request-Id, also over an upstream\'s own, and a problem body carries it too', async () => {
    const { url: upUrl } = await listen((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'x-request-id': 'the-upstream-s-own' });
      res.end('ok');
    });
    const f = await front(upstreamConfig(upUrl));
    const answer = await get(`${f.url}/items`);
    expect(answer.headers['x-request-id']).toBe('request-under-test');
    const refused = await front(upstreamConfig(`http://127.0.0.1:${await closedPort()}`));
    const problem = await get(`${refused.url}/x`);
    expect(problem.status).toBe(502);
    expect(problem.headers['x-request-id']).toBe('request-under-test');
  });

  it('a refused connection is a 502 problem body; the outcome names it', async () => {
    const f = await front(upstreamConfig(`http://127.0.0.1:${await closedPort()}`));
    const answer = await get(`${f.url}/x`);
    await Promise.all(f.settled);
    expect(answer.status).toBe(502);
    expect(answer.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'bad_gateway' });
    expect(f.outcomes[0]!.problem).toBe('bad_gateway');
  });

  it('an upstream that does not answer within responseMs is a 504', async () => {
    const { url: upUrl } = await listen(() => {});
    const f = await front(upstreamConfig(upUrl, 150));
    const answer = await get(`${f.url}/slow`);
    await Promise.all(f.settled);
    expect(answer.status).toBe(504);
    expect(f.outcomes[0]!.problem).toBe('gateway_timeout');
  });

  it('a 504 comes once the upstream has been quiet for responseMs, never before; a response that keeps moving lives past idleMs', async () => {
    const { url: silentUrl } = await listen(() => {});
    const silent = await front(upstreamConfig(silentUrl, 300));
    const started = performance.now();
    expect((await get(`${silent.url}/slow`)).status).toBe(504);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(1500);
    // idleMs is 2000: ten parts 300 ms apart take longer than that, but the connection is never quiet for it.
    const { url: tricklingUrl } = await listen((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      let parts = 0;
      const timer = setInterval(() => {
        res.write(`part ${parts}\n`);
        if (++parts === 10) {
          clearInterval(timer);
          res.end();
        }
      }, 300);
    });
    const trickling = await front(upstreamConfig(tricklingUrl, 1000));
    const answer = await get(`${trickling.url}/stream`);
    await Promise.all(trickling.settled);
    expect(answer.status).toBe(200);
    expect(answer.body.split('\n').filter(Boolean)).toHaveLength(10);
    expect(trickling.outcomes[0]!.cut).toBeUndefined();
  });

  it('gives upstream connections no timer of their own: a pooled connection carries none after any number of exchanges', async () => {
    const { url: upUrl } = await listen((_req, res) => res.end('ok'));
    const up = upstreamConfig(upUrl);
    const forwarder = new Forwarder({ up }, silentLogger);
    open.push({ close: () => forwarder.close() });
    const { url } = await listen((req, res) => {
      void forwarder.forward(req, res, { upstream: 'up', timeouts: up.timeouts, strippedPrefix: undefined }, { requestId: 'r', problem: undefined, cut: undefined });
    });
    const agent = (forwarder as unknown as { upstreams: Map<string, { pool: { targets: Array<{ agent: { freeSockets: Record<string, object[]> } }> } }> })
      .upstreams.get('up')!.pool.targets[0]!.agent;
    // Node keeps a socket's timer under a symbol of its own (each setTimeout() on the socket replaces it).
    const timer = (socket: object) => {
      const key = Object.getOwnPropertySymbols(socket).find((k) => k.description === 'timeout')!;
      return (socket as Record<symbol, unknown>)[key];
    };
    for (let i = 0; i < 4; i++) expect((await get(`${url}/x`)).status).toBe(200);
    const pooled = Object.values(agent.freeSockets).flat();
    expect(pooled).toHaveLength(1);
    expect(timer(pooled[0]!)).toBeFalsy();
  });

  it('closes an idle pooled connection a second before the upstream\'s announced Keep-Alive timeout', async () => {
    let closedAfter: Promise<number> | undefined;
    let answered = 0;
    const { server, url: upUrl } = await listen((req, res) => {
      closedAfter ??= new Promise((resolve) => req.socket.once('end', () => resolve(performance.now() - answered)));
      res.end('ok', () => (answered = performance.now()));
    });
    // Node's server says `Keep-Alive: timeout=2` and closes idle connections after 2 s itself.
    server.keepAliveTimeout = 2000;
    const f = await front(upstreamConfig(upUrl));
    expect((await get(`${f.url}/x`)).status).toBe(200);
    const idleFor = await closedAfter!;
    expect(idleFor).toBeGreaterThanOrEqual(950);
    expect(idleFor).toBeLessThan(1900);
  });

  it('a client that leaves mid-response ends the upstream\'s work and is recorded as cut', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    const { url: upUrl } = await listen((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first part');
      res.on('close', () => upstreamClosed());
    });
    const f = await front(upstreamConfig(upUrl));
    await new Promise<void>((resolve) => {
      const req = request(`${f.url}/stream`, (res) => res.once('data', () => {
        req.destroy();
        resolve();
      }));
      req.on('error', () => {});
      req.end();
    });
    await closed;
    await Promise.all(f.settled);
    expect(f.outcomes[0]!.cut).toBe('client_closed');
  });
});
