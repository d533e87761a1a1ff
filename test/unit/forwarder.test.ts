import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
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

function upstreamConfig(url: string, responseMs = 2000, maxConnections = 8): UpstreamConfig {
  return {
    url, targets: [url], balance: 'round-robin', cooldownMs: 1000, timeouts: { connectMs: 500, responseMs, idleMs: 2000 },
    preserveHost: false, maxConnections, maxQueued: 8, maxTunnels: 8,
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

  it('sends the request target exactly as the pipeline left it in req.url, after the target\'s base path', async () => {
    const { url: upUrl } = await listen((req, res) => res.end(req.url));
    const f = await front(upstreamConfig(`${upUrl}/base`));
    // A backslash the gateway's request form refuses in paths: url.parse (http-proxy's reading) would have made it a slash.
    const port = new URL(f.url).port;
    const target = await new Promise<string>((resolve, reject) => {
      request({ host: '127.0.0.1', port, path: '/a\\b?q=x\\y' }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve(body));
      }).on('error', reject).end();
    });
    expect(target).toBe('/base/a\\b?q=x\\y');
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

  it('a client that leaves while its request waits for a connection withdraws it: the upstream never gets it', async () => {
    const seen: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const { url: upUrl } = await listen((req, res) => {
      seen.push(req.url!);
      if (req.url === '/first') void held.then(() => res.end('first'));
      else res.end('other');
    });
    // One connection: /first holds it, /waiting queues behind it on the agent.
    const f = await front(upstreamConfig(upUrl, 2000, 1));
    const first = get(`${f.url}/first`);
    await vi.waitFor(() => expect(seen).toEqual(['/first']));
    const waiting = request(`${f.url}/waiting`);
    waiting.on('error', () => {});
    waiting.end();
    await vi.waitFor(() => expect(f.outcomes).toHaveLength(2));
    waiting.destroy();
    await vi.waitFor(() => expect(f.outcomes[1]!.cut).toBe('client_closed'));
    release();
    expect((await first).body).toBe('first');
    // The connection is free again and the next request is served on it; /waiting never went out.
    expect((await get(`${f.url}/after`)).body).toBe('other');
    expect(seen).toEqual(['/first', '/after']);
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

  it('sends a request without a body as soon as it has a connection, without piping the client\'s request; a body is streamed', async () => {
    const { url: upUrl } = await listen((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => res.end(`${req.method} ${body}`));
    });
    const forwarder = new Forwarder({ up: upstreamConfig(upUrl) }, silentLogger);
    open.push({ close: () => forwarder.close() });
    const piped: boolean[] = [];
    const { url } = await listen((req, res) => {
      const pipe = vi.spyOn(req, 'pipe');
      void forwarder.forward(req, res, { upstream: 'up', timeouts: upstreamConfig(upUrl).timeouts, strippedPrefix: undefined }, { requestId: 'r', problem: undefined, cut: undefined })
        .then(() => piped.push(pipe.mock.calls.length > 0));
    });
    const port = new URL(url).port;
    const send = (method: string, body?: string) => new Promise<string>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method, path: '/x', headers: body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject).end(body);
    });
    expect(await send('GET')).toBe('GET ');
    expect(await send('DELETE')).toBe('DELETE ');
    expect(await send('POST', 'a body')).toBe('POST a body');
    await vi.waitFor(() => expect(piped).toEqual([false, false, true]));
  });
});
