import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { UpstreamConfig } from '../../src/config/types.js';
import { silentLogger } from '../../src/log.js';
import { Forwarder, type ForwardOutcome, type UpstreamErrorKind } from '../../src/proxy/forward.js';
import { closedPort } from '../support/process.js';
import { exchangeUntilClosed, openRaw } from '../support/raw-client.js';

/**
 * http-proxy 1.18.1's traps, each met before (or instead of) its hand-off, shown on raw sockets through the
 * Forwarder alone: a bare node:http front hands each request to forward() with the header object the
 * pipeline would have built, and a real upstream records what it parsed.
 */
const open: Array<{ close(): void }> = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; url: string; port: number }> {
  const server = createServer(handler);
  open.push({ close: () => server.close() });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const port = (server.address() as AddressInfo).port;
    resolve({ server, url: `http://127.0.0.1:${port}`, port });
  }));
}

/** An upstream that records every request it parses (body included) and answers 200 `ok`. */
async function recordingUpstream(): Promise<{ url: string; seen: Seen[]; connections: () => number }> {
  const seen: Seen[] = [];
  let connections = 0;
  const { server, url } = await listen((req, res) => {
    let body = '';
    req.setEncoding('latin1');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.end('ok');
    });
  });
  server.on('connection', () => connections++);
  return { url, seen, connections: () => connections };
}

function upstreamConfig(targets: string[], responseMs = 2000): UpstreamConfig {
  return {
    url: targets[0]!, targets, balance: 'round-robin', cooldownMs: 1000, timeouts: { connectMs: 500, responseMs, idleMs: 2000 },
    preserveHost: false, maxConnections: 8, maxQueued: 8, maxTunnels: 8,
  };
}

/**
 * A front whose every request the Forwarder sends to `up`, with the upstream header object `headers`
 * makes of the client's (the pipeline's upstream headers step, reduced to what a test needs).
 */
async function front(up: UpstreamConfig, headers?: (req: IncomingMessage) => IncomingHttpHeaders, clock?: ManualClock) {
  const errors: UpstreamErrorKind[] = [];
  const forwarder = new Forwarder({ up }, silentLogger, (_name, kind) => errors.push(kind), clock);
  open.push({ close: () => forwarder.close() });
  const outcomes: ForwardOutcome[] = [];
  const { port } = await listen((req, res) => {
    const outcome: ForwardOutcome = { requestId: 'r', upstreamHeaders: headers?.(req), problem: undefined, cut: undefined };
    outcomes.push(outcome);
    void forwarder.forward(req, res, { upstream: 'up', timeouts: up.timeouts, strippedPrefix: undefined }, outcome);
  });
  return { port, outcomes, errors };
}

const chunk = (s: string) => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`;
const hidden = 'GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Authenticated-User: mallory\r\nContent-Length: 0\r\n\r\n';

describe('http-proxy\'s traps, met by the Forwarder', () => {
  it.each(['DELETE', 'OPTIONS'])('deleteLength: a %s with a chunked body is one upstream request, chunked, body intact (never a second request)', async (method) => {
    const up = await recordingUpstream();
    const f = await front(upstreamConfig([up.url]), (req) => ({ ...req.headers }));
    const answer = await exchangeUntilClosed(f.port, `${method} /x HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk(hidden.slice(0, 9))}${chunk(hidden.slice(9))}0\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    // The upstream's connection stays pooled: a smuggled request would have been parsed on it by now,
    // before the answer to the next request on the same connection.
    await exchangeUntilClosed(f.port, 'GET /after HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
    expect(up.seen.map((s) => `${s.method} ${s.url}`)).toEqual([`${method} /x`, 'GET /after']);
    expect(up.seen[0]!.headers['transfer-encoding']).toBe('chunked');
    expect(up.seen[0]!.headers['content-length']).toBeUndefined();
    expect(up.seen[0]!.body).toBe(hidden);
  });

  it('deleteLength: a DELETE without a body goes out without a Content-Length it never had', async () => {
    const up = await recordingUpstream();
    const f = await front(upstreamConfig([up.url]), (req) => ({ ...req.headers }));
    expect(await exchangeUntilClosed(f.port, 'DELETE /x HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect(up.seen[0]!.headers['content-length']).toBeUndefined();
    expect(up.seen[0]!.headers['transfer-encoding']).toBeUndefined();
  });

  it('url.parse and path joining: the request target reaches the upstream byte for byte, after the target\'s base path', async () => {
    const up = await recordingUpstream();
    const f = await front(upstreamConfig([`${up.url}/base`]));
    // url.parse makes a backslash a slash; http-proxy's urlJoin collapses `//` and makes `http:/` `http://`.
    const target = '/a//b/http:/c\\d?q=//e\\f&u=http:/g';
    expect(await exchangeUntilClosed(f.port, `GET ${target} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);
    expect(up.seen[0]!.url).toBe(`/base${target}`);
  });

  it('header copying: the upstream gets the header object built for it, never the client\'s own headers (nor an appended X-Forwarded-For)', async () => {
    const up = await recordingUpstream();
    const built = (req: IncomingMessage): IncomingHttpHeaders => ({ host: req.headers.host, accept: req.headers.accept, 'x-forwarded-for': '203.0.113.7', 'x-authenticated-user': 'alice' });
    const f = await front(upstreamConfig([up.url]), built);
    const answer = await exchangeUntilClosed(f.port, [
      'GET /x HTTP/1.1', 'Host: gw', 'Accept: text/plain', 'Authorization: Basic c2VjcmV0OnNlY3JldA==', 'X-Forwarded-For: 6.6.6.6',
      'X-Authenticated-User: mallory', 'X-Client-Only: 1', 'Connection: close', '', '',
    ].join('\r\n'));
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    const h = up.seen[0]!.headers;
    expect(h.accept).toBe('text/plain');
    expect(h['x-forwarded-for']).toBe('203.0.113.7');
    expect(h['x-authenticated-user']).toBe('alice');
    expect(h.authorization).toBeUndefined();
    expect(h['x-client-only']).toBeUndefined();
    expect(h.host).toBe(new URL(up.url).host);
  });

  it('Expect: a request with Expect: 100-continue gets the headers set before the hand-off (http-proxy emits no proxyReq for it)', async () => {
    const up = await recordingUpstream();
    const f = await front(upstreamConfig([up.url]), (req) => ({ host: req.headers.host, 'content-length': req.headers['content-length'], 'x-authenticated-user': 'alice' }));
    const c = await openRaw(f.port);
    c.socket.write('POST /x HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 4\r\nConnection: close\r\n\r\n');
    expect(await c.waitFor(/100 Continue/, 2000)).toBe(true);
    c.socket.write('body');
    await c.closed();
    expect(c.text()).toMatch(/HTTP\/1\.1 200 /);
    expect(up.seen[0]).toMatchObject({ method: 'POST', body: 'body', headers: { 'x-authenticated-user': 'alice' } });
    expect(up.seen[0]!.headers.expect).toBeUndefined();
  });

  it('agent: requests share the target\'s keep-alive connection (without an agent each would open one)', async () => {
    const up = await recordingUpstream();
    // The header object without the client's hop-by-hop `Connection: close`, as the header policy builds it.
    const f = await front(upstreamConfig([up.url]), (req) => ({ host: req.headers.host }));
    for (const path of ['/1', '/2', '/3']) {
      expect(await exchangeUntilClosed(f.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);
    }
    expect(up.seen).toHaveLength(3);
    expect(up.connections()).toBe(1);
  });

  it('error listener: an upstream that resets the connection is a 502 problem, and the next request is served', async () => {
    let first = true;
    const { url } = await listen((req, res) => {
      if (first) {
        first = false;
        req.socket.destroy();
      } else {
        res.end('ok');
      }
    });
    // A POST is not sent again: the reset reaches the client as the gateway's answer.
    const f = await front(upstreamConfig([url]));
    const answer = await exchangeUntilClosed(f.port, 'POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx');
    expect(answer).toMatch(/^HTTP\/1\.1 502 /);
    expect(answer).toContain('application/problem+json');
    expect(answer).toContain('"code":"bad_gateway"');
    expect(await exchangeUntilClosed(f.port, 'GET /y HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect(f.errors).toEqual(['reset']);
  });

  it('proxyTimeout: an upstream that does not answer is a 504 (the Forwarder\'s own timer), not the 502 of a reset', async () => {
    const { url } = await listen(() => {});
    const f = await front(upstreamConfig([url], 100));
    const answer = await exchangeUntilClosed(f.port, 'GET /slow HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 504 /);
    expect(answer).toContain('"code":"gateway_timeout"');
    expect(f.errors).toEqual(['timeout']);
  });

  it('client aborts: a client that leaves before the answer ends the upstream request (http-proxy does not on Node >= 15.5)', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    let arrived!: () => void;
    const thinking = new Promise<void>((r) => (arrived = r));
    const { url } = await listen((req, res) => {
      res.on('close', () => upstreamClosed());
      req.resume().on('end', arrived);
    });
    const f = await front(upstreamConfig([url]));
    const c = await openRaw(f.port);
    // The whole body was read: Node emits no 'aborted' for a complete request, the one thing http-proxy listens for.
    c.socket.write('POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\n\r\nbody');
    await thinking;
    c.socket.destroy();
    await closed;
    await vi.waitFor(() => expect(f.outcomes[0]!.cut).toBe('client_closed'));
  });

  it('takes the clock it is given: a target that refused is skipped for the cool-down, and tried again once the clock passed it', async () => {
    const clock = new ManualClock();
    const up = await recordingUpstream();
    const down = `http://127.0.0.1:${await closedPort()}`;
    const f = await front(upstreamConfig([down, up.url]), undefined, clock);
    const get = (path: string) => exchangeUntilClosed(f.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n`);
    // Round-robin starts at the refusing target: refused, sent again to the other one.
    expect(await get('/1')).toMatch(/^HTTP\/1\.1 200 /);
    expect(f.errors).toEqual(['refused']);
    for (const path of ['/2', '/3']) expect(await get(path)).toMatch(/^HTTP\/1\.1 200 /);
    expect(f.errors).toEqual(['refused']);
    clock.advance(1000);
    for (const path of ['/4', '/5']) expect(await get(path)).toMatch(/^HTTP\/1\.1 200 /);
    expect(f.errors).toEqual(['refused', 'refused']);
    expect(up.seen.map((s) => s.url)).toEqual(['/1', '/2', '/3', '/4', '/5']);
  });
});
