import { execFile } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { connect as h2connect, constants, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { basic, gatewayFixture } from '../support/fixtures.js';
import { ErrorCode, RawH2, getRequest, headersFrame, rstStream } from '../support/h2-frames.js';
import { TestPki } from '../support/tls-pki.js';
import { waitUntil } from '../support/poll.js';

const run = promisify(execFile);
let pki: TestPki;
let wss: WebSocketServer;
let wsUrl: string;

const gw = gatewayFixture({
  log: 'info',
  before: async () => {
    pki = new TestPki();
    wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    wss.on('connection', (ws) => ws.on('message', (m) => ws.send(`echo:${String(m)}`)));
    wsUrl = `http://127.0.0.1:${(wss.address() as { port: number }).port}`;
  },
  config: (f) => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, tls: { certFile: pki.certFile, keyFile: pki.keyFile } },
    log: { level: 'info', access: true },
    forwardAuth: { path: '/auth/verify' },
    upstreams: { echo: { url: f.echo.url, maxConnections: 64, maxQueued: 4096 }, ws: { url: wsUrl } },
    routes: [{ path: '/v1/items', upstream: 'echo' }, { path: '/v1/socket', upstream: 'ws' }, { path: '/wiki' }],
  }),
  after: async () => {
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    pki.remove();
  },
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request over HTTP/1.1 on a connection of its own (no ALPN: HTTP/1.1). */
function viaHttp1(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port: gw.port, method, path, headers, ca: pki.ca, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: { ...res.headers }, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** One request as a stream of `session`. */
function viaHttp2(session: ClientHttp2Session, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const length = body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) };
    const stream = session.request({ ':method': method, ':path': path, ...length, ...headers });
    let status = 0;
    let got: IncomingHttpHeaders = {};
    let text = '';
    stream.on('response', (h) => {
      status = Number(h[':status']);
      got = h;
    });
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (text += d));
    stream.on('end', () => {
      const out: Answer['headers'] = {};
      for (const [name, value] of Object.entries(got)) if (!name.startsWith(':')) out[name] = value;
      resolve({ status, headers: out, body: text });
    });
    stream.on('error', reject);
    stream.end(body);
  });
}

function h2session(): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = h2connect(`https://127.0.0.1:${gw.port}`, { ca: pki.ca });
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

/** What may differ between the two protocols' answers: framing, the connection, the time. */
const PER_PROTOCOL = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding']);
function comparable(a: Answer): { status: number; headers: Record<string, unknown>; body: unknown } {
  const headers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(a.headers)) if (!PER_PROTOCOL.has(name)) headers[name] = value;
  let body: unknown = a.body;
  if (String(a.headers['content-type']).includes('json') && a.body) {
    body = JSON.parse(a.body);
    // An echo of what the upstream received: its own connection and the order of raw headers differ.
    if (body && typeof body === 'object' && 'rawHeaders' in body) {
      const echo = body as { rawHeaders?: unknown; headers: Record<string, unknown> };
      delete echo.rawHeaders;
      delete echo.headers.connection;
    }
    // New tokens every time: compare their shape.
    if (body && typeof body === 'object' && 'accessToken' in body) body = Object.fromEntries(Object.entries(body).map(([k, v]) => [k, typeof v]));
  }
  return { status: a.status, headers, body };
}

let session: ClientHttp2Session;
let bearer: string;
let refreshToken: string;

beforeAll(async () => {
  session = await h2session();
  const created = JSON.parse((await viaHttp1('POST', '/v1/tokens/create', { 'content-type': 'application/json' }, JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }))).body) as { accessToken: string; refreshToken: string };
  bearer = `Bearer ${created.accessToken}`;
  refreshToken = created.refreshToken;
});
afterAll(() => session?.close());

describe('HTTP/2 on the TLS listener', () => {
  it('ALPN offers h2 and http/1.1: a client that offers h2 gets it, one that offers only http/1.1 gets that', async () => {
    const alpn = (protocols: string[]) => new Promise<string | false | null>((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: gw.port, ca: pki.ca, servername: 'localhost', ALPNProtocols: protocols }, () => {
        resolve(socket.alpnProtocol);
        socket.destroy();
      });
      socket.on('error', reject);
    });
    expect(await alpn(['h2', 'http/1.1'])).toBe('h2');
    expect(await alpn(['h2'])).toBe('h2');
    expect(await alpn(['http/1.1'])).toBe('http/1.1');
  });

  it('curl --http2 negotiates h2 and is answered', async () => {
    const { stdout } = await run('curl', ['--http2', '-sS', '--cacert', pki.caFile, '-u', 'alice:alice-pw', '-o', '/dev/null',
      '-w', '%{http_version} %{http_code}', `https://127.0.0.1:${gw.port}/v1/items/1`], { timeout: 15_000 });
    expect(stdout).toBe('2 200');
  });

  it('Basic, Bearer, the token endpoints, forward-auth and own endpoints answer the same over HTTP/2 as over HTTP/1.1', async () => {
    const id = { 'x-request-id': 'same-id-for-both' };
    const json = { 'content-type': 'application/json' };
    const cases: Array<[string, string, Record<string, string>, string?]> = [
      ['GET', '/v1/items/7?size=3', { authorization: basic('alice', 'alice-pw') }],
      ['GET', '/v1/items/7', { authorization: bearer }],
      ['POST', '/v1/items', { authorization: bearer, ...json }, '{"a":1}'],
      ['GET', '/v1/items/7', {}],
      ['GET', '/v1/items/7', { authorization: basic('alice', 'wrong') }],
      ['GET', '/v1/items/7', { authorization: 'Bearer not-a-token' }],
      ['GET', '/nowhere', { authorization: bearer }],
      ['POST', '/v1/tokens/create', json, JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' })],
      ['POST', '/v1/tokens/create', json, JSON.stringify({ appKey: 'alice', appSecret: 'nope' })],
      ['POST', '/v1/tokens/refresh', json, JSON.stringify({ refreshToken: 'not-one' })],
      ['POST', '/v1/tokens/create', json, '{'],
      ['GET', '/auth/verify', { authorization: bearer, 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/wiki/page', 'x-forwarded-host': 'wiki.example.com' }],
      ['GET', '/auth/verify', { 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/wiki/page' }],
      ['GET', '/healthz', {}],
      ['GET', '/readyz', {}],
      ['OPTIONS', '/v1/items', { origin: 'https://app.example.com', 'access-control-request-method': 'GET' }],
      ['DELETE', '/v1/tokens/create', json],
    ];
    for (const [method, path, headers, body] of cases) {
      const one = await viaHttp1(method, path, { ...id, ...headers }, body);
      const two = await viaHttp2(session, method, path, { ...id, ...headers }, body);
      expect(comparable(two), `${method} ${path}`).toEqual(comparable(one));
    }
    // The refresh token of the first pair, over HTTP/2: a new pair.
    const refreshed = await viaHttp2(session, 'POST', '/v1/tokens/refresh', json, JSON.stringify({ refreshToken }));
    expect(refreshed.status).toBe(200);
    expect(JSON.parse(refreshed.body)).toHaveProperty('accessToken');
  });

  it('the upstream gets HTTP/1.1 without pseudo-headers; :authority is the Host and X-Forwarded-Host; identity headers set', async () => {
    gw.echo.received.length = 0;
    const answer = await viaHttp2(session, 'GET', '/v1/items/9', { authorization: bearer, 'x-authenticated-user': 'mallory' });
    expect(answer.status).toBe(200);
    const seen = gw.echo.received.at(-1)!;
    expect(Object.keys(seen.headers).filter((n) => n.startsWith(':'))).toEqual([]);
    expect(seen.headers['x-forwarded-host']).toBe(`127.0.0.1:${gw.port}`);
    expect(seen.headers['x-forwarded-proto']).toBe('https');
    expect(seen.headers['x-authenticated-user']).toBe('alice');
    expect(seen.headers['x-authenticated-via']).toBe('bearer');
    expect(seen.url).toBe('/v1/items/9');
  });

  it('a body without Content-Length reaches the upstream whole, chunked', async () => {
    gw.echo.received.length = 0;
    const stream = session.request({ ':method': 'PUT', ':path': '/v1/items/3', authorization: bearer });
    stream.write('first,');
    await new Promise((r) => setTimeout(r, 20));
    stream.end('second');
    const status = await new Promise<number>((resolve) => stream.on('response', (h) => resolve(Number(h[':status']))));
    stream.resume();
    expect(status).toBe(200);
    const seen = gw.echo.received.at(-1)!;
    expect(seen.body).toBe('first,second');
    expect(seen.headers['transfer-encoding']).toBe('chunked');
  });

  it('a Host that differs from :authority is refused with a problem body', async () => {
    const answer = await viaHttp2(session, 'GET', '/v1/items/9', { authorization: bearer, ':authority': `127.0.0.1:${gw.port}`, host: 'elsewhere.example.com' });
    expect(answer.status).toBe(400);
    expect(answer.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'invalid_request' });
  });

  it('connection-specific headers of an upstream never reach an h2 client, and never cost a 500', async () => {
    const previous = gw.echo.handler;
    gw.echo.handler = (_req, res) => {
      res.setHeader('connection', 'keep-alive, x-private');
      res.setHeader('keep-alive', 'timeout=5');
      res.setHeader('upgrade', 'h2c');
      res.setHeader('proxy-connection', 'keep-alive');
      res.setHeader('x-private', 'hop');
      res.setHeader('x-kept', 'yes');
      res.end('hello');
    };
    try {
      const answer = await viaHttp2(session, 'GET', '/v1/items/1', { authorization: bearer });
      expect(answer.status).toBe(200);
      expect(answer.body).toBe('hello');
      expect(answer.headers['x-kept']).toBe('yes');
      for (const name of ['connection', 'keep-alive', 'upgrade', 'proxy-connection', 'transfer-encoding', 'x-private']) expect(answer.headers[name], name).toBeUndefined();
      // Chunked from the upstream: framed by HTTP/2 itself.
      gw.echo.handler = (_req, res) => {
        res.write('a');
        res.end('b');
      };
      expect((await viaHttp2(session, 'GET', '/v1/items/1', { authorization: bearer })).body).toBe('ab');
    } finally {
      gw.echo.handler = previous;
    }
  });

  it('a problem answered before the body was read (Connection: close on HTTP/1.1) is a plain answer on HTTP/2', async () => {
    const stream = session.request({ ':method': 'POST', ':path': '/v1/items', 'content-type': 'text/plain' });
    stream.write('part of a body that never ends');
    const status = await new Promise<number>((resolve) => stream.on('response', (h) => resolve(Number(h[':status']))));
    expect(status).toBe(401);
    stream.close();
    // The connection goes on serving.
    expect((await viaHttp2(session, 'GET', '/healthz')).status).toBe(200);
  });

  it('CONNECT over HTTP/2 is refused with a 405 problem', async () => {
    const stream = session.request({ ':method': 'CONNECT', ':authority': 'example.com:443' });
    const status = await new Promise<number>((resolve) => stream.on('response', (h) => resolve(Number(h[':status']))));
    expect(status).toBe(405);
    stream.close();
  });

  it('counts requests with a protocol label and writes the same access line', async () => {
    gw.logs.length = 0;
    await viaHttp2(session, 'GET', '/v1/items/5', { authorization: bearer, 'x-request-id': 'h2-access-line' });
    const text = await gw.gateway.metrics.registry.getSingleMetricAsString('auth_gateway_requests_total');
    expect(text).toMatch(/auth_gateway_requests_total\{route="\/v1\/items",method="GET",status_class="2xx",auth="bearer",protocol="h2"\} [1-9]/);
    expect(text).toMatch(/protocol="http\/1\.1"/);
    const line = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === 'h2-access-line');
    expect(line).toMatchObject({ msg: 'request', method: 'GET', path: '/v1/items/5', status: 200, user: 'alice', via: 'bearer', route: '/v1/items', upstream: 'echo' });
  });

  it('an h2 access line has the bytes of its stream\'s response body; an HTTP/1.1 line, the bytes of its answer on the connection', async () => {
    const lineOf = async (requestId: string) => {
      const find = () => gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request' && l.requestId === requestId);
      const until = Date.now() + 10_000;
      while (!find() && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      return find()!;
    };
    // A proxied answer larger than HTTP/2's initial flow-control window, written by the upstream in chunks.
    const big = 'x'.repeat(150_000);
    const before = gw.echo.handler;
    gw.echo.handler = (_req, res) => {
      res.setHeader('content-type', 'text/plain');
      for (let i = 0; i < 3; i++) res.write(big.slice(i * 50_000, (i + 1) * 50_000));
      res.end('é');
    };
    try {
      const h2 = await viaHttp2(session, 'GET', '/v1/items/big', { authorization: bearer, 'x-request-id': 'h2-bytes-big' });
      expect(Buffer.byteLength(h2.body)).toBe(150_002);
      expect((await lineOf('h2-bytes-big')).bytes).toBe(150_002);
      const h1 = await viaHttp1('GET', '/v1/items/big', { authorization: bearer, 'x-request-id': 'h1-bytes-big' });
      expect(Buffer.byteLength(h1.body)).toBe(150_002);
      // HTTP/1.1 counts the status line, the headers and the chunked framing too.
      expect((await lineOf('h1-bytes-big')).bytes as number).toBeGreaterThan(150_002);
      const head = await viaHttp2(session, 'HEAD', '/v1/items/big', { authorization: bearer, 'x-request-id': 'h2-bytes-head' });
      expect(head.status).toBe(200);
      expect((await lineOf('h2-bytes-head')).bytes).toBe(0);
    } finally {
      gw.echo.handler = before;
    }
    // A problem body the gateway wrote itself, and an own endpoint's answer.
    const refused = await viaHttp2(session, 'GET', '/v1/items/1', { 'x-request-id': 'h2-bytes-401' });
    expect(refused.status).toBe(401);
    expect((await lineOf('h2-bytes-401')).bytes).toBe(Buffer.byteLength(refused.body));
    const create = await viaHttp2(session, 'POST', '/v1/tokens/create', { 'content-type': 'application/json', 'x-request-id': 'h2-bytes-create' }, JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }));
    expect(create.status).toBe(200);
    expect((await lineOf('h2-bytes-create')).bytes).toBe(Buffer.byteLength(create.body));
  });

  it('every h2 access line has the client address, streams that ended at once included', async () => {
    gw.logs.length = 0;
    const ids: string[] = [];
    const asks: Array<Promise<Answer>> = [];
    for (let i = 0; i < 40; i++) {
      const id = `h2-address-${i}`;
      ids.push(id);
      // Proxied (Bearer: nothing reads the address while it is served), refused at once, no route, HEAD, a sign-in.
      const [method, path, headers] = ([
        ['GET', `/v1/items/${i}`, { authorization: bearer }],
        ['GET', '/v1/items/1', {}],
        ['GET', '/nowhere', { authorization: bearer }],
        ['HEAD', '/v1/items/1', { authorization: bearer }],
        ['POST', '/v1/tokens/create', { 'content-type': 'application/json' }],
      ] as const)[i % 5]!;
      const body = method === 'POST' ? JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }) : undefined;
      asks.push(viaHttp2(session, method, path, { ...headers, 'x-request-id': id }, body));
    }
    await Promise.all(asks);
    await waitUntil(() => ids.every((id) => accessLines().some((l) => l.requestId === id)));
    const lines = accessLines().filter((l) => ids.includes(l.requestId as string));
    expect(lines.map((l) => [l.requestId, l.address])).toEqual(lines.map((l) => [l.requestId, '127.0.0.1']));
  });

  it('streams the client reset before any answer (RST_STREAM NO_ERROR or CANCEL) are logged and counted as 499 client_closed, as an HTTP/1.1 client that leaves', async () => {
    gw.logs.length = 0;
    const statuses = async () => (await gw.gateway.metrics.registry.getMetricsAsJSON())
      .find((m) => m.name === 'auth_gateway_requests_total')!.values.filter((v) => v.labels.protocol === 'h2')
      .reduce<Record<string, number>>((all, v) => ({ ...all, [String(v.labels.status_class)]: (all[String(v.labels.status_class)] ?? 0) + v.value }), {});
    const before = await statuses();
    const previous = gw.echo.handler;
    let held = 0;
    // The upstream never answers: every stream is reset while it waits.
    gw.echo.handler = () => void held++;
    const raw = await RawH2.open(gw.port, { ca: pki.ca });
    try {
      const frames: Buffer[] = [];
      for (let i = 0, id = 1; i < 10; i++, id += 2) {
        const request = getRequest(`/v1/items/${i}`, `127.0.0.1:${gw.port}`, [['authorization', bearer], ['x-request-id', `h2-reset-${i}`]]);
        frames.push(headersFrame(id, request));
      }
      await raw.send(...frames);
      await waitUntil(() => held === 10);
      const resets: Buffer[] = [];
      for (let i = 0, id = 1; i < 10; i++, id += 2) resets.push(rstStream(id, i % 2 === 0 ? ErrorCode.NO_ERROR : ErrorCode.CANCEL));
      await raw.send(...resets);
      await waitUntil(() => accessLines().filter((l) => String(l.requestId).startsWith('h2-reset-')).length === 10);
      // An HTTP/1.1 client that leaves before its answer: the same line.
      const h1 = tlsConnect({ host: '127.0.0.1', port: gw.port, ca: pki.ca, servername: 'localhost', ALPNProtocols: ['http/1.1'] });
      h1.on('error', () => {});
      h1.write(`GET /v1/items/h1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${bearer}\r\nX-Request-Id: h1-reset\r\n\r\n`);
      await waitUntil(() => held === 11);
      h1.destroy();
      await waitUntil(() => accessLines().some((l) => l.requestId === 'h1-reset'));
    } finally {
      gw.echo.handler = previous;
      raw.close();
    }
    const lines = accessLines().filter((l) => /^h[12]-reset/.test(String(l.requestId)));
    expect(lines).toHaveLength(11);
    for (const line of lines) expect(line, String(line.requestId)).toMatchObject({ status: 499, cut: 'client_closed', address: '127.0.0.1', user: 'alice' });
    const after = await statuses();
    expect((after['4xx'] ?? 0) - (before['4xx'] ?? 0)).toBe(10);
    expect(after['2xx']).toBe(before['2xx']);
  });

  it('streams of one connection share the upstream admission (maxConnections + maxQueued) as requests on many connections do', async () => {
    // 64 + 4096 places: 300 streams at once on one connection (3 × maxConcurrentStreams, the rest wait for a stream) all pass.
    const answers = await Promise.all(Array.from({ length: 300 }, (_, i) => viaHttp2(session, 'GET', `/v1/items/${i}`, { authorization: bearer })));
    expect(answers.every((a) => a.status === 200)).toBe(true);
  });

  it('WebSockets keep HTTP/1.1 on the same listener', async () => {
    const ws = new WebSocket(`wss://127.0.0.1:${gw.port}/v1/socket`, { ca: pki.ca, headers: { authorization: bearer } });
    const reply = await new Promise<string>((resolve, reject) => {
      ws.once('open', () => ws.send('hi'));
      ws.once('message', (m) => resolve(String(m)));
      ws.once('error', reject);
    });
    expect(reply).toBe('echo:hi');
    ws.close();
  });

  it('h2load -n 20000 -c 10 -m 50 completes with 0 errors', async () => {
    const { stdout } = await run('h2load', ['-n', '20000', '-c', '10', '-m', '50', '-H', `authorization: ${bearer}`,
      `https://127.0.0.1:${gw.port}/v1/items/1`], { timeout: 110_000 });
    expect(stdout).toMatch(/Application protocol: h2/);
    expect(stdout).toMatch(/requests: 20000 total, 20000 started, 20000 done, 20000 succeeded, 0 failed, 0 errored, 0 timeout/);
    expect(stdout).toMatch(/status codes: 20000 2xx, 0 3xx, 0 4xx, 0 5xx/);
  }, 120_000);
});

describe('HTTP/2 and a drain', () => {
  it('a drain sends GOAWAY; the stream in progress is answered', async () => {
    const other = await h2session();
    const previous = gw.echo.handler;
    let release = () => {};
    gw.echo.handler = (_req, res) => {
      release = () => res.end('late');
    };
    try {
      const pending = viaHttp2(other, 'GET', '/v1/items/slow', { authorization: bearer });
      await waitUntil(() => gw.echo.received.some((r) => r.url === '/v1/items/slow'));
      const goaway = new Promise<number>((resolve) => other.once('goaway', (code) => resolve(code)));
      const closed = gw.gateway.close(5000);
      expect(await goaway).toBe(constants.NGHTTP2_NO_ERROR);
      release();
      expect((await pending).body).toBe('late');
      await closed;
    } finally {
      gw.echo.handler = previous;
      other.destroy();
    }
  });
});

function accessLines(): Array<Record<string, unknown>> {
  return gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request');
}

