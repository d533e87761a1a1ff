import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect as h2connect, type ClientHttp2Session, type IncomingHttpHeaders as Http2Headers } from 'node:http2';
import { afterEach, expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { openRaw } from '../support/raw-client.js';

/**
 * Trailers and 103 Early Hints between an HTTP/1.1 upstream (the Forwarder, over http-proxy) and
 * HTTP/1.1 and HTTP/2 clients. The h2 engine's equivalents are in h2-upstream.test.ts.
 */
const BASIC = 'Basic ' + Buffer.from('alice:alice-pw').toString('base64');
/** What the upstream does with each request; a test sets it. */
let onRequest: (req: IncomingMessage, res: ServerResponse) => void = () => {};
let upstream: Server;
let upstreamUrl: string;
/** A port nothing listens on: the first target of `pair` refuses every connection. */
let deadUrl: string;

const gw = gatewayFixture({
  before: async () => {
    upstream = createServer((req, res) => onRequest(req, res));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    deadUrl = `http://127.0.0.1:${(closed.address() as { port: number }).port}`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
  },
  config: () => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, h2c: true },
    upstreams: { h1: { url: upstreamUrl }, pair: { targets: [deadUrl, upstreamUrl] } },
    routes: [{ path: '/h1', upstream: 'h1' }, { path: '/pair', upstream: 'pair' }],
  }),
  after: async () => {
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  },
});

afterEach(() => {
  onRequest = () => {};
});

/** A chunked answer whose trailers carry a gRPC-style status, and names of the removed-headers table. */
function answerWithTrailers(seen?: (req: IncomingMessage) => void): void {
  onRequest = (req, res) => {
    seen?.(req);
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'grpc-status, grpc-message, x-authenticated-user' });
    res.write('body');
    res.addTrailers({ 'grpc-status': '0', 'grpc-message': 'fine', 'x-authenticated-user': 'mallory', authorization: 'Bearer leaked', 'x-amzn-oidc-data': 'forged' });
    res.end();
  };
}

/** An upstream that answers with the trailers of the request it got. */
function echoTrailers(): Promise<{ body: string; trailers: Record<string, unknown> }> {
  return new Promise((resolve) => {
    onRequest = (req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => (body += d));
      req.on('end', () => {
        resolve({ body, trailers: { ...req.trailers } });
        res.end('ok');
      });
    };
  });
}

function h2(): ClientHttp2Session {
  return h2connect(`http://127.0.0.1:${gw.port}`);
}

it('response trailers of a chunked HTTP/1.1 upstream reach an HTTP/1.1 client on its chunked body, announced, without the removed names', async () => {
  let te: string | undefined;
  answerWithTrailers((req) => (te = String(req.headers.te)));
  const c = await openRaw(gw.port);
  c.socket.write(`GET /h1/t HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nTE: trailers\r\nConnection: close\r\n\r\n`);
  await c.closed();
  const raw = c.text();
  expect(raw).toMatch(/^HTTP\/1\.1 200/);
  expect(raw).toMatch(/\r\n[Tt]ransfer-[Ee]ncoding: chunked\r\n/);
  expect(raw).toMatch(/\r\n[Tt]railer: grpc-status, grpc-message\r\n/);
  expect(raw).toMatch(/\r\n0\r\ngrpc-status: 0\r\ngrpc-message: fine\r\n\r\n$/);
  expect(raw).not.toMatch(/mallory|leaked|forged/);
  // The client asked for trailers: so was the upstream asked.
  expect(te).toBe('trailers');
});

it('an HTTP/1.0 client gets the body of a chunked answer that announced trailers, without them (it cannot take a chunked body)', async () => {
  answerWithTrailers();
  const c = await openRaw(gw.port);
  c.socket.write(`GET /h1/t10 HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\n\r\n`);
  await c.closed();
  const raw = c.text();
  expect(raw).toMatch(/^HTTP\/1\.1 200/);
  expect(raw).not.toMatch(/\r\n[Tt]railer:|[Tt]ransfer-[Ee]ncoding|grpc-status/);
  expect(raw).toMatch(/\r\n\r\nbody$/);
});

it('an HTTP/1.1 upstream is asked for trailers only when the client asked', async () => {
  const seen: Array<string | undefined> = [];
  onRequest = (req, res) => {
    seen.push(req.headers.te as string | undefined);
    res.end('ok');
  };
  const c = await openRaw(gw.port);
  c.socket.write(`GET /h1/no-te HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nTE: gzip\r\nConnection: close\r\n\r\n`);
  await c.closed();
  expect(c.text()).toMatch(/^HTTP\/1\.1 200/);
  expect(seen).toEqual([undefined]);
});

it('response trailers of a chunked HTTP/1.1 upstream reach an HTTP/2 client as the stream\'s trailers, without the removed names', async () => {
  answerWithTrailers();
  const session = h2();
  try {
    const stream = session.request({ ':path': '/h1/t2', authorization: BASIC, te: 'trailers' });
    let body = '';
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (body += d));
    let trailers: Http2Headers = {};
    stream.on('trailers', (t) => (trailers = t));
    await new Promise((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    expect(body).toBe('body');
    expect(trailers['grpc-status']).toBe('0');
    expect(trailers['grpc-message']).toBe('fine');
    expect(trailers['x-authenticated-user']).toBeUndefined();
    expect(trailers.authorization).toBeUndefined();
    expect(trailers['x-amzn-oidc-data']).toBeUndefined();
  } finally {
    session.close();
  }
});

it('request trailers of a chunked HTTP/1.1 body reach the HTTP/1.1 upstream, without the removed names', async () => {
  const got = echoTrailers();
  const c = await openRaw(gw.port);
  c.socket.write(`POST /h1/rt HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sent\r\nConnection: close\r\n\r\n`);
  c.socket.write(`5\r\nhello\r\n0\r\nX-Sent: yes\r\nX-Authenticated-User: mallory\r\nX_Authenticated_User: mallory\r\nAuthorization: ${BASIC}\r\nX-Consumer-Id: forged\r\n\r\n`);
  const { body, trailers } = await got;
  await c.closed();
  expect(c.text()).toMatch(/^HTTP\/1\.1 200/);
  expect(body).toBe('hello');
  expect(trailers).toEqual({ 'x-sent': 'yes' });
});

it('request trailers of an HTTP/2 client reach the HTTP/1.1 upstream, without the removed names', async () => {
  const got = echoTrailers();
  const session = h2();
  try {
    const stream = session.request({ ':method': 'POST', ':path': '/h1/rt2', authorization: BASIC }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'x-sent': 'yes', 'x-authenticated-user': 'mallory', 'remote-user': 'mallory' }));
    stream.end('hello');
    stream.resume();
    const { body, trailers } = await got;
    expect(body).toBe('hello');
    expect(trailers).toEqual({ 'x-sent': 'yes' });
    await new Promise((resolve) => stream.on('close', resolve));
  } finally {
    session.close();
  }
});

/** Early hints, then the answer once the client's side had time to see them. */
function hintsThenAnswer(): void {
  onRequest = (req, res) => {
    req.resume();
    res.writeEarlyHints({ link: '</app.js>; rel=preload', 'x-authenticated-user': 'mallory' });
    setTimeout(() => res.end('after hints'), 20).unref();
  };
}

it('103 Early Hints of an HTTP/1.1 upstream reach an HTTP/1.1 client before its answer', async () => {
  hintsThenAnswer();
  const c = await openRaw(gw.port);
  c.socket.write(`GET /h1/hints HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nConnection: close\r\n\r\n`);
  await c.closed();
  const raw = c.text();
  expect(raw).toMatch(/^HTTP\/1\.1 103 Early Hints\r\n[Ll]ink: <\/app\.js>; rel=preload\r\n\r\nHTTP\/1\.1 200/);
  expect(raw).toMatch(/after hints/);
  expect(raw).not.toMatch(/mallory/);
});

it('103 Early Hints of an HTTP/1.1 upstream never reach an HTTP/1.0 client (it has no 1xx): only the answer', async () => {
  hintsThenAnswer();
  const c = await openRaw(gw.port);
  c.socket.write(`GET /h1/hints10 HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\n\r\n`);
  await c.closed();
  const raw = c.text();
  expect(raw).toMatch(/^HTTP\/1\.1 200 /);
  expect(raw).not.toMatch(/103|Early Hints|[Ll]ink:/);
  expect(raw).toMatch(/\r\n\r\nafter hints$/);
});

it('103 Early Hints of an HTTP/1.1 upstream reach an HTTP/2 client before its answer', async () => {
  hintsThenAnswer();
  const session = h2();
  try {
    const stream = session.request({ ':path': '/h1/hints2', authorization: BASIC });
    const informational: Http2Headers[] = [];
    stream.on('headers', (h) => informational.push(h));
    const response = await new Promise<Http2Headers>((resolve, reject) => {
      stream.on('response', resolve);
      stream.on('error', reject);
    });
    stream.resume();
    await new Promise((resolve) => stream.on('end', resolve));
    expect(response[':status']).toBe(200);
    expect(informational).toHaveLength(1);
    expect(informational[0]![':status']).toBe(103);
    expect(informational[0]!.link).toBe('</app.js>; rel=preload');
    expect(informational[0]!['x-authenticated-user']).toBeUndefined();
  } finally {
    session.close();
  }
});

it('other 1xx of an HTTP/1.1 upstream are the hop\'s own: a 100 or a 102 never reaches the client', async () => {
  onRequest = (req, res) => {
    req.resume();
    res.writeContinue();
    res.writeProcessing();
    setTimeout(() => res.end('done'), 20).unref();
  };
  const c = await openRaw(gw.port);
  c.socket.write(`GET /h1/one-xx HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${BASIC}\r\nConnection: close\r\n\r\n`);
  await c.closed();
  expect(c.text()).toMatch(/^HTTP\/1\.1 200/);
  expect(c.text()).not.toMatch(/HTTP\/1\.1 10[02]/);
});

it('an HTTP/2 client\'s request sent again on another target (the first refused it) is sent whole there', async () => {
  onRequest = (req, res) => {
    req.resume();
    res.end(`got ${req.url}`);
  };
  const session = h2();
  try {
    // Round robin: one of the first two tries the refusing target first, and is sent again.
    const answers = await Promise.all(['/pair/a', '/pair/b'].map((path) => new Promise<string>((resolve, reject) => {
      const stream = session.request({ ':path': path, authorization: BASIC });
      let body = '';
      stream.setEncoding('utf8');
      stream.on('data', (d: string) => (body += d));
      stream.on('end', () => resolve(body));
      stream.on('error', reject);
      stream.setTimeout(5000, () => reject(new Error(`no answer to ${path} within 5 s`)));
    })));
    expect(answers).toEqual(['got /pair/a', 'got /pair/b']);
  } finally {
    session.close();
  }
});
