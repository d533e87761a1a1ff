import { connect as h2connect, constants, createServer as createH2Server, type Http2Server, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import { afterEach, expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { grpc, grpcClient, grpcUpstream, withAuthorization, type GrpcUpstream, type Msg } from '../support/grpc.js';
import { exchangeUntilClosed } from '../support/raw-client.js';

const BASIC = 'Basic ' + Buffer.from('alice:alice-pw').toString('base64');
/** What the bare upstream does with each stream; a test sets it. */
let onStream: (stream: ServerHttp2Stream, path: string) => void = () => {};
let bare: Http2Server;
let bareUrl: string;
const bareSessions = new Set<Http2Session>();
let doomed: GrpcUpstream;

const gw = gatewayFixture({
  before: async () => {
    bare = createH2Server();
    bare.on('session', (s: Http2Session) => {
      bareSessions.add(s);
      s.once('close', () => bareSessions.delete(s));
    });
    bare.on('stream', (stream, headers) => {
      // The streams a GOAWAY refused end with an error on this side too.
      stream.on('error', () => {});
      onStream(stream, String(headers[':path']));
    });
    await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
    bareUrl = `http://127.0.0.1:${(bare.address() as { port: number }).port}`;
    doomed = await grpcUpstream();
  },
  config: () => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, h2c: true },
    upstreams: {
      one: { url: bareUrl, protocol: 'h2c', maxConnections: 1, maxQueued: 16 },
      four: { url: bareUrl, protocol: 'h2c', maxConnections: 4, maxQueued: 16 },
      tight: { url: bareUrl, protocol: 'h2c', maxConnections: 1, maxQueued: 1 },
      doomed: { url: doomed.url, protocol: 'h2c' },
    },
    routes: [{ path: '/tight', upstream: 'tight' }, { path: '/one', upstream: 'one' }, { path: '/four', upstream: 'four' }, { path: '/test.Plain', upstream: 'doomed' }],
  }),
  after: async () => {
    for (const s of bareSessions) s.destroy();
    await new Promise<void>((resolve) => bare.close(() => resolve()));
  },
});

afterEach(() => {
  onStream = () => {};
});

function get(path: string): Promise<{ status: number; body: string }> {
  return fetch(`${gw.base}${path}`, { headers: { authorization: BASIC } }).then(async (r) => ({ status: r.status, body: await r.text() }));
}

it('a GOAWAY with requests queued behind the only stream: they go to a new connection, none fails', async () => {
  let first = true;
  onStream = (stream, path) => {
    if (first) {
      first = false;
      // Graceful GOAWAY (this stream is the last it takes), then the answer a little later.
      stream.session!.close();
      setTimeout(() => {
        stream.respond({ ':status': 200 });
        stream.end(`first ${path}`);
      }, 100).unref();
      return;
    }
    stream.respond({ ':status': 200 });
    stream.end(`later ${path}`);
  };
  const firstAnswer = get('/one/0');
  // Queued behind it: maxConnections 1 is one stream at a time to the target.
  const queued = [1, 2, 3, 4, 5].map((i) => get(`/one/${i}`));
  const answers = await Promise.all([firstAnswer, ...queued]);
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
  expect(answers[0]!.body).toBe('first /one/0');
  expect(answers.slice(1).map((a) => a.body)).toEqual([1, 2, 3, 4, 5].map((i) => `later /one/${i}`));
});

it('streams past a GOAWAY\'s last stream id (refused unprocessed) are sent again on a new connection, bodies included', async () => {
  let goneAway = false;
  onStream = (stream, path) => {
    const session = stream.session!;
    if (!goneAway) {
      goneAway = true;
      // Takes this one only: the streams already opened behind it are refused (REFUSED_STREAM).
      session.goaway(constants.NGHTTP2_NO_ERROR, stream.id!);
    }
    let body = '';
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (body += d));
    stream.on('end', () => {
      stream.respond({ ':status': 200 });
      stream.end(`${path}:${body}`);
    });
  };
  const answers = await Promise.all([0, 1, 2, 3].map((i) => fetch(`${gw.base}/four/${i}`, { method: 'POST', body: `b${i}`, headers: { authorization: BASIC } }).then(async (r) => `${r.status} ${await r.text()}`)));
  expect(answers).toEqual([0, 1, 2, 3].map((i) => `200 /four/${i}:b${i}`));
});

it('response trailers of an h2 upstream reach an HTTP/1.1 client on its chunked body', async () => {
  onStream = (stream) => {
    stream.respond({ ':status': 200, 'content-type': 'text/plain' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'x-checksum': 'abc', 'grpc-status': '0' }));
    stream.end('body');
  };
  const raw = await exchangeUntilClosed(gw.port, `GET /one/t HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nTE: trailers\r\nConnection: close\r\n\r\n`);
  expect(raw).toMatch(/^HTTP\/1\.1 200/);
  expect(raw).toMatch(/transfer-encoding: chunked/i);
  expect(raw).toMatch(/\r\n0\r\nx-checksum: abc\r\ngrpc-status: 0\r\n\r\n$/);
});

it('response trailers of an h2 upstream reach an HTTP/2 client (h2c listener), and the client\'s request trailers reach the upstream', async () => {
  onStream = (stream) => {
    stream.on('trailers', (t) => {
      stream.respond({ ':status': 200 }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'x-got': String(t['x-sent']) }));
      stream.end('ok');
    });
    stream.resume();
  };
  const session = h2connect(`http://127.0.0.1:${gw.port}`);
  const stream = session.request({ ':method': 'POST', ':path': '/one/t2', authorization: BASIC, te: 'trailers' }, { waitForTrailers: true });
  stream.on('wantTrailers', () => stream.sendTrailers({ 'x-sent': 'yes' }));
  stream.end('payload');
  const trailers = await new Promise<Record<string, unknown>>((resolve) => stream.on('trailers', resolve));
  stream.resume();
  await new Promise((resolve) => stream.on('close', resolve));
  session.close();
  expect(trailers['x-got']).toBe('yes');
});

it('names of the removed-headers table are dropped from trailers both ways and from early hints, as from heads', async () => {
  let got: Record<string, unknown> = {};
  onStream = (stream) => {
    stream.additionalHeaders({ ':status': 103, link: '</x.css>; rel=preload', 'x-authenticated-user': 'mallory' });
    stream.on('trailers', (t) => {
      got = { ...t };
      stream.respond({ ':status': 200 }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'x-authenticated-user': 'mallory', authorization: 'Bearer leaked', 'x-pomerium-claim-email': 'forged' }));
      stream.end('ok');
    });
    stream.resume();
  };
  const session = h2connect(`http://127.0.0.1:${gw.port}`);
  const stream = session.request({ ':method': 'POST', ':path': '/one/removed', authorization: BASIC, te: 'trailers' }, { waitForTrailers: true });
  stream.on('wantTrailers', () => stream.sendTrailers({ 'x-sent': 'yes', 'x-authenticated-user': 'mallory', 'x-forwarded-user': 'mallory', authorization: BASIC }));
  const hints = new Promise<Record<string, unknown>>((resolve) => stream.once('headers', resolve));
  stream.end('payload');
  const trailers = new Promise<Record<string, unknown>>((resolve) => stream.on('trailers', resolve));
  stream.resume();
  await new Promise((resolve) => stream.on('close', resolve));
  session.close();
  expect(got['x-sent']).toBe('yes');
  for (const name of ['x-authenticated-user', 'x-forwarded-user', 'authorization']) expect(got[name], name).toBeUndefined();
  const back = await trailers;
  expect(back['grpc-status']).toBe('0');
  for (const name of ['x-authenticated-user', 'authorization', 'x-pomerium-claim-email']) expect(back[name], name).toBeUndefined();
  const early = await hints;
  expect(early.link).toBe('</x.css>; rel=preload');
  expect(early['x-authenticated-user']).toBeUndefined();
});

it('103 Early Hints of an h2 upstream reach an HTTP/2 client', async () => {
  onStream = (stream) => {
    stream.additionalHeaders({ ':status': 103, link: '</style.css>; rel=preload' });
    setTimeout(() => {
      stream.respond({ ':status': 200 });
      stream.end('after hints');
    }, 20).unref();
  };
  const session = h2connect(`http://127.0.0.1:${gw.port}`);
  const stream = session.request({ ':path': '/one/hints', authorization: BASIC });
  const hints = new Promise<Record<string, unknown>>((resolve) => stream.once('headers', resolve));
  stream.end();
  expect((await hints).link).toBe('</style.css>; rel=preload');
  stream.resume();
  await new Promise((resolve) => stream.on('close', resolve));
  session.close();
});

it('an upstream killed mid-stream: the gRPC client gets UNAVAILABLE, never a hang', async () => {
  const c = grpcClient('Plain', gw.port);
  const call = (c as unknown as { Slow: (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<Msg> }).Slow({ n: 1000 }, withAuthorization(BASIC));
  const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  call.on('error', () => {});
  await new Promise((resolve) => call.once('data', resolve));
  doomed.kill();
  const s = await status;
  expect(s.code).toBe(grpc.status.UNAVAILABLE);
  expect(s.details).toMatch(/closed the call mid-stream/);
  c.close();
});

it('admission: maxConnections streams in progress and maxQueued waiting per target; past both, 503 with Retry-After', async () => {
  const held: ServerHttp2Stream[] = [];
  onStream = (stream) => held.push(stream);
  const answers = [0, 1, 2].map((i) => fetch(`${gw.base}/tight/${i}`, { headers: { authorization: BASIC } }));
  // Nothing is answered until one of them is refused: the other two hold the stream and the queue.
  const refused = await Promise.race(answers);
  expect(refused.status).toBe(503);
  expect(refused.headers.get('retry-after')).toBe('1');
  expect((await refused.json() as { code: string }).code).toBe('service_unavailable');
  onStream = (stream) => {
    stream.respond({ ':status': 200 });
    stream.end('late');
  };
  for (const stream of held) {
    stream.respond({ ':status': 200 });
    stream.end('held');
  }
  const statuses = (await Promise.all(answers)).map((r) => r.status).sort();
  expect(statuses).toEqual([200, 200, 503]);
});

it('request trailers of a chunked HTTP/1.1 body reach an h2 upstream', async () => {
  onStream = (stream) => {
    let body = '';
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (body += d));
    stream.on('trailers', (t) => {
      stream.respond({ ':status': 200 });
      stream.end(`${body}|${String(t['x-sent'])}`);
    });
  };
  const raw = await exchangeUntilClosed(gw.port, `POST /one/rt HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sent\r\nConnection: close\r\n\r\n` + '5\r\nhello\r\n0\r\nX-Sent: yes\r\n\r\n');
  expect(raw).toMatch(/^HTTP\/1\.1 200/);
  expect(raw).toContain('hello|yes');
});

it('an HTTP/1.1 request with an HTTP2-Settings header reaches an h2 upstream without it (HTTP/2 forbids it on a request)', async () => {
  let seen: Record<string, unknown> = {};
  onStream = (stream) => {
    stream.respond({ ':status': 200 });
    stream.end('ok');
  };
  bare.once('stream', (_s, headers) => (seen = headers));
  const raw = await exchangeUntilClosed(gw.port, `GET /one/settings HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nConnection: close\r\n\r\n`);
  expect(raw).toMatch(/^HTTP\/1\.1 200/);
  expect(seen['http2-settings']).toBeUndefined();
});

it('103 Early Hints of an h2 upstream reach an HTTP/1.1 client before its answer', async () => {
  onStream = (stream) => {
    stream.additionalHeaders({ ':status': 103, link: '</app.js>; rel=preload' });
    setTimeout(() => {
      stream.respond({ ':status': 200 });
      stream.end('after hints');
    }, 20).unref();
  };
  const raw = await exchangeUntilClosed(gw.port, `GET /one/hints1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nConnection: close\r\n\r\n`);
  expect(raw).toMatch(/^HTTP\/1\.1 103 Early Hints\r\n[Ll]ink: <\/app\.js>; rel=preload\r\n\r\nHTTP\/1\.1 200/);
  expect(raw).toMatch(/after hints/);
});

it('103 Early Hints of an h2 upstream never reach an HTTP/1.0 client (it has no 1xx): only the answer', async () => {
  let hinted = false;
  onStream = (stream) => {
    stream.additionalHeaders({ ':status': 103, link: '</app.js>; rel=preload' });
    hinted = true;
    setTimeout(() => {
      stream.respond({ ':status': 200 });
      stream.end('after hints');
    }, 20).unref();
  };
  const raw = await exchangeUntilClosed(gw.port, `GET /one/hints10 HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\n\r\n`);
  expect(hinted).toBe(true);
  expect(raw).toMatch(/^HTTP\/1\.1 200 /);
  expect(raw).not.toMatch(/103|Early Hints|[Ll]ink:/);
  expect(raw).toMatch(/\r\n\r\nafter hints$/);
});

it('an h2c upstream gets the header policy\'s headers: the identity, never the client\'s credentials or made-up identity headers', async () => {
  onStream = (stream) => {
    stream.respond({ ':status': 200 });
    stream.end('ok');
  };
  let received: Record<string, string | string[] | undefined> = {};
  bare.once('stream', (_stream, headers) => {
    received = headers as Record<string, string | string[] | undefined>;
  });
  const res = await fetch(`${gw.base}/four/who`, {
    headers: { authorization: BASIC, 'x-authenticated-user': 'mallory', 'remote-user': 'mallory', 'x-forwarded-user': 'mallory', 'x-original-url': '/admin' },
  });
  expect(res.status).toBe(200);
  expect(received['x-authenticated-user']).toBe('alice');
  expect(received['x-authenticated-via']).toBe('basic');
  expect(received.authorization).toBeUndefined();
  expect(received['remote-user']).toBeUndefined();
  expect(received['x-forwarded-user']).toBeUndefined();
  expect(received['x-original-url']).toBeUndefined();
});
