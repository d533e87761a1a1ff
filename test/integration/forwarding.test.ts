import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { rewriteLocation } from '../../src/proxy/location.js';
import { basic, gatewayFixture } from '../support/fixtures.js';
import { openRaw } from '../support/raw-client.js';

// Real traffic shapes through the front door: uploads slower than the response timeout, quiet
// streams, redirects to the upstream's own address, prefixes, Host, HTTP/1.0 keep-alive.

const ALICE = basic('alice', 'alice-pw');
let upstream: Server;
let upstreamUrl: string;
const logLines: string[] = [];
const seen: Array<{ url: string; host: string | undefined; body: string }> = [];

/** One upstream, its behaviour chosen by path. */
function behave(req: IncomingMessage, res: ServerResponse, body: string): void {
  const path = req.url!.split('?')[0]!;
  if (path.endsWith('/slow-answer')) {
    setTimeout(() => res.end('late'), 800);
  } else if (path.endsWith('/events')) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
    setTimeout(() => res.write('data: two\n\n'), 700);
    setTimeout(() => res.end('data: three\n\n'), 1400);
  } else if (path.endsWith('/stalls')) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
  } else if (path.endsWith('/redirect')) {
    res.writeHead(301, {
      location: `${upstreamUrl}/files/sub/?x=1`,
      'content-location': `${upstreamUrl}/files/doc`,
    });
    res.end();
  } else if (path.endsWith('/elsewhere')) {
    res.writeHead(302, { location: 'http://other.example/files/' });
    res.end();
  } else if (path.startsWith('/base/') && path.endsWith('/moved')) {
    res.writeHead(302, { location: `${upstreamUrl}/base/sub/` });
    res.end();
  } else if (path.endsWith('/chunked')) {
    res.write('part one, ');
    res.end('part two');
  } else {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ url: req.url, host: req.headers.host, bytes: body.length }));
  }
}

const gw = gatewayFixture({
  echo: false,
  before: async () => {
    upstream = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        seen.push({ url: req.url!, host: req.headers.host, body });
        behave(req, res, body);
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
  },
  config: () => ({
    upstreams: {
      up: { url: upstreamUrl, timeouts: { responseMs: 500, idleMs: 1000 } },
      based: { url: `${upstreamUrl}/base`, timeouts: { responseMs: 500, idleMs: 1000 } },
      host: { url: upstreamUrl, preserveHost: true },
    },
    routes: [
      { path: '/v1/up', upstream: 'up' },
      { path: '/files', upstream: 'based', stripPrefix: true },
      { path: '/kept', upstream: 'host' },
    ],
    log: { level: 'info', access: true },
  }),
  deps: () => ({ log: createLogger('info', (line) => logLines.push(line)) }),
  after: async () => {
    upstream?.closeAllConnections();
    await new Promise((r) => upstream?.close(r));
  },
});

interface Answer {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
  /** What arrived, with the time since the request started. */
  chunks: Array<{ at: number; text: string }>;
  complete: boolean;
}

/** A request whose body is written in `parts`, `gapMs` apart. */
function call(path: string, options: { method?: string; parts?: string[]; gapMs?: number; headers?: Record<string, string> } = {}): Promise<Answer> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = request(`${gw.base}${path}`, { method: options.method ?? 'GET', headers: { authorization: ALICE, ...options.headers }, agent: false }, (res) => {
      const chunks: Answer['chunks'] = [];
      res.on('data', (c: Buffer) => chunks.push({ at: Date.now() - started, text: c.toString() }));
      res.on('close', () => resolve({ status: res.statusCode!, headers: res.headers, body: chunks.map((c) => c.text).join(''), chunks, complete: res.complete }));
    });
    req.on('error', reject);
    const parts = options.parts ?? [];
    let i = 0;
    const next = () => {
      if (i === parts.length) return void req.end();
      req.write(parts[i++]);
      setTimeout(next, options.gapMs ?? 0);
    };
    next();
  });
}

describe('the timeout model', () => {
  it('an upload slower than the response timeout passes: the response timer starts once the body is sent', async () => {
    const parts = Array.from({ length: 6 }, () => 'x'.repeat(1000));
    const r = await call('/v1/up/upload', { method: 'POST', parts, gapMs: 200 });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ bytes: 6000 });
  });

  it('an upstream that takes longer than responseMs to answer after the body arrived gets 504', async () => {
    const r = await call('/v1/up/slow-answer');
    expect(r.status).toBe(504);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'gateway_timeout', detail: expect.stringMatching(/did not answer within 500 ms/) });
  });

  it('a quiet event stream (gaps longer than responseMs, shorter than idleMs) lives to its end', async () => {
    const r = await call('/v1/up/events');
    expect(r.status).toBe(200);
    expect(r.complete).toBe(true);
    expect(r.body).toBe('data: one\n\ndata: two\n\ndata: three\n\n');
  });

  it('a stream silent for idleMs is cut, and logged as cut rather than as a clean 200', async () => {
    const r = await call('/v1/up/stalls');
    expect(r.status).toBe(200);
    expect(r.complete).toBe(false);
    expect(r.body).toBe('data: one\n\n');
    await new Promise((res) => setTimeout(res, 50));
    const line = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.path === '/v1/up/stalls');
    expect(line).toMatchObject({ status: 200, cut: 'response_idle', route: '/v1/up', upstream: 'up' });
  });
});

describe('redirects, prefixes and Host', () => {
  it('rewrites a Location (and Content-Location) on the upstream\'s own origin to a path on the gateway', async () => {
    const r = await call('/v1/up/redirect');
    expect(r.status).toBe(301);
    expect(r.headers.location).toBe('/files/sub/?x=1');
    expect(r.headers['content-location']).toBe('/files/doc');
    expect(JSON.stringify(r.headers)).not.toContain(upstreamUrl);
    // Resolved by the client against the origin it used: the gateway's.
    expect(new URL(r.headers.location!, gw.base).origin).toBe(gw.base);
  });

  it('a spoofed X-Forwarded-Host cannot turn the rewritten redirect into an open redirect', async () => {
    const r = await call('/v1/up/redirect', { headers: { 'x-forwarded-host': 'evil.example' } });
    expect(r.headers.location).toBe('/files/sub/?x=1');
  });

  it('leaves a redirect to another origin alone', async () => {
    const r = await call('/v1/up/elsewhere');
    expect(r.headers.location).toBe('http://other.example/files/');
  });

  it('strips the route prefix, joins the rest onto the upstream path, and maps redirects back', async () => {
    const r = await call('/files/a/b?q=1');
    expect(JSON.parse(r.body)).toMatchObject({ url: '/base/a/b?q=1' });
    expect(JSON.parse((await call('/files')).body)).toMatchObject({ url: '/base/' });
    const moved = await call('/files/x/moved');
    expect(moved.headers.location).toBe('/files/sub/');
  });

  it('sends the upstream its own host by default, and the client\'s with preserveHost', async () => {
    expect(JSON.parse((await call('/v1/up/h')).body).host).toBe(new URL(upstreamUrl).host);
    expect(JSON.parse((await call('/kept/h')).body).host).toBe(`127.0.0.1:${gw.port}`);
  });

  const map = { upstreamOrigins: ['http://up:9000', 'http://up2:9000'], upstreamBasePath: '', routePrefix: undefined };
  it.each([
    ['http://up:9000/x', '/x'],
    ['HTTP://UP:9000/x', '/x'],
    ['http://up:9000', '/'],
    ['http://up:80/x', 'http://up:80/x'],
    ['http://up2:9000/y?q=1#f', '/y?q=1#f'],
    ['http://up:9001/x', 'http://up:9001/x'],
    ['https://up:9000/x', 'https://up:9000/x'],
    ['/x', '/x'],
    ['x/y', 'x/y'],
    ['?page=2', '?page=2'],
    // What browsers read as the upstream's own address is rewritten too.
    ['//up:9000/x', '/x'],
    ['http:\\\\up:9000\\admin', '/admin'],
    ['http:/up:9000/admin', '/admin'],
    // Never a protocol-relative result: that would be an open redirect.
    ['http://up:9000//evil.example/x', '/evil.example/x'],
    ['http://up:9000/\\evil.example', '/evil.example'],
    // Another origin is the upstream's own business.
    ['//other.example/x', '//other.example/x'],
    ['/\\other.example', '/\\other.example'],
  ])('rewriteLocation(%s) → %s', (value, expected) => {
    expect(rewriteLocation(value, map)).toBe(expected);
  });

  it.each([
    ['http://up:9000/base/sub', '/files/sub'],
    ['/base', '/files'],
    ['/base?x', '/files?x'],
    ['/basement', '/basement'],
    ['/other', '/other'],
  ])('rewriteLocation(%s) with a stripped prefix → %s', (value, expected) => {
    expect(rewriteLocation(value, { upstreamOrigins: ['http://up:9000'], upstreamBasePath: '/base', routePrefix: '/files' })).toBe(expected);
  });
});

describe('HTTP/1.0 clients', () => {
  /** Writes each request on one connection and collects what comes back until it closes or goes quiet. */
  async function session(requests: string[]): Promise<string> {
    const c = await openRaw(gw.port);
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    c.socket.write(requests.shift()!);
    let before = 0;
    for (;;) {
      // The answer begins (or the connection closes; at most 5 s), then the connection goes quiet for 100 ms.
      const deadline = Date.now() + 5000;
      while (c.text().length === before && !c.isClosed() && Date.now() < deadline) await sleep(10);
      let seen: number;
      do {
        seen = c.text().length;
        await Promise.race([c.closed(), sleep(100)]);
      } while (c.text().length !== seen && !c.isClosed());
      before = c.text().length;
      const next = requests.shift();
      if (!next || c.isClosed()) break;
      c.socket.write(next);
    }
    c.socket.destroy();
    return c.text();
  }

  it('keep-alive survives a forwarded response (as ApacheBench -k needs)', async () => {
    const req = `GET /v1/up/a HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nConnection: keep-alive\r\n\r\n`;
    const out = await session([req, req, req]);
    const heads = [...out.matchAll(/HTTP\/1\.[01] [\s\S]*?\r\n\r\n/g)].map((m) => m[0]);
    expect(heads).toHaveLength(3);
    for (const head of heads) {
      expect(head).toMatch(/^HTTP\/1\.1 200/);
      expect(head).toMatch(/\r\nconnection: keep-alive/i);
      expect(head).toMatch(/\r\ncontent-length: \d+/i);
    }
  });

  it('a response the upstream streams without a length reaches an HTTP/1.0 client unchunked, ended by the close', async () => {
    const out = await session([`GET /v1/up/chunked HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nConnection: keep-alive\r\n\r\n`]);
    const [head, body] = out.split('\r\n\r\n');
    expect(head).not.toMatch(/transfer-encoding/i);
    expect(head).toMatch(/connection: close/i);
    expect(body).toBe('part one, part two');
  });
});
