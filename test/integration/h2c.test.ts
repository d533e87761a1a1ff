import { execFile } from 'node:child_process';
import { connect as h2connect, createServer as createH2Server, type Http2Server } from 'node:http2';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { createTokens, gatewayFixture, startGateway, testConfig } from '../support/fixtures.js';
import { grpc, grpcClient, grpcUpstream, unary, withAuthorization, type GrpcUpstream, type Msg } from '../support/grpc.js';

const run = promisify(execFile);
let plain: GrpcUpstream;
/** A bare node:http2 h2c upstream: 200 with the path and the HTTP version it was reached with. */
let bare: Http2Server;
let bareUrl: string;

const gw = gatewayFixture({
  before: async () => {
    plain = await grpcUpstream();
    bare = createH2Server((req, res) => {
      req.resume();
      res.setHeader('content-type', 'text/plain');
      res.end(`h2 upstream ${req.httpVersion} ${req.url} user=${String(req.headers['x-authenticated-user'])}`);
    });
    await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
    bareUrl = `http://127.0.0.1:${(bare.address() as { port: number }).port}`;
  },
  config: () => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, h2c: true, http2: { maxHeaderListBytes: 1024 } },
    upstreams: { plain: { url: plain.url, protocol: 'h2c' }, bare: { url: bareUrl, protocol: 'h2c', maxConnections: 64 } },
    routes: [{ path: '/test.Plain', upstream: 'plain' }, { path: '/v1/bare', upstream: 'bare' }],
  }),
  after: async () => {
    await plain.close();
    await new Promise<void>((resolve) => bare.close(() => resolve()));
  },
});

it('a gRPC client with prior knowledge (h2c) on the plain listener reaches an h2c upstream', async () => {
  const c = grpcClient('Plain', gw.port);
  const answer = await unary<Msg>(c, 'Unary', { text: 'plain' }, withAuthorization('Basic ' + Buffer.from('alice:alice-pw').toString('base64')));
  expect(answer.text).toBe('alice:plain');
  const refused = await unary<Msg>(c, 'Unary', { text: 'x' }).then(() => undefined, (e: grpc.ServiceError) => e);
  expect(refused?.code).toBe(grpc.status.UNAUTHENTICATED);
  c.close();
});

it('HTTP/1.1 keeps working on the same port: a problem body for a refusal, and an h2c upstream behind it', async () => {
  const refused = await fetch(`${gw.base}/v1/bare/x`);
  expect(refused.status).toBe(401);
  expect(refused.headers.get('content-type')).toBe('application/problem+json');
  expect((await refused.json() as { code: string }).code).toBe('missing_credentials');
  const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
  const res = await fetch(`${gw.base}/v1/bare/x`, { headers: { authorization: `Bearer ${accessToken}` } });
  expect(res.status).toBe(200);
  expect(await res.text()).toBe('h2 upstream 2.0 /v1/bare/x user=alice');
});

it('the TLS listener\'s flood limits apply to h2c: an oversized header list closes the connection with GOAWAY', async () => {
  const session = h2connect(`http://127.0.0.1:${gw.port}`);
  const goaway = new Promise<number>((resolve) => session.once('goaway', (code: number) => resolve(code)));
  session.on('error', () => {});
  const stream = session.request({ ':path': '/v1/bare/x', 'x-big': 'a'.repeat(2000) });
  stream.on('error', () => {});
  stream.end();
  expect(await goaway).toBe(11); // ENHANCE_YOUR_CALM
  session.destroy();
});

it('h2load over h2c through an h2c upstream finishes with 0 errors', async () => {
  const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
  const { stdout } = await run('h2load', ['-n', '2000', '-c', '4', '-m', '16', '-H', `authorization: Bearer ${accessToken}`, `http://127.0.0.1:${gw.port}/v1/bare/load`], { timeout: 60_000 });
  expect(stdout).toMatch(/requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout/);
  expect(stdout).toMatch(/status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx/);
}, 60_000);

it('a drain sends the h2c connections GOAWAY: the stream in progress finishes, then the connection closes', async () => {
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  const slow = createH2Server((req, res) => {
    req.resume();
    void held.then(() => res.end('finished'));
  });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  const arrived = new Promise((resolve) => slow.once('request', resolve));
  const own = await startGateway(testConfig(gw.users.file, {
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 5000, h2c: true },
    upstreams: { slow: { url: `http://127.0.0.1:${(slow.address() as { port: number }).port}`, protocol: 'h2c' } },
    routes: [{ path: '/v1/slow', upstream: 'slow' }],
  }));
  const session = h2connect(`http://127.0.0.1:${own.port}`);
  const goaway = new Promise<void>((resolve) => session.once('goaway', () => resolve()));
  const stream = session.request({ ':path': '/v1/slow/x', authorization: 'Basic ' + Buffer.from('alice:alice-pw').toString('base64') });
  stream.end();
  const response = new Promise<number>((resolve) => stream.on('response', (h) => resolve(Number(h[':status']))));
  let body = '';
  stream.setEncoding('utf8');
  stream.on('data', (d: string) => (body += d));
  // The drain begins once the stream is at the upstream.
  await arrived;
  const closed = own.gateway.close(5000);
  await goaway;
  release();
  expect(await response).toBe(200);
  await new Promise((resolve) => stream.on('close', resolve));
  expect(body).toBe('finished');
  await closed;
  session.destroy();
  await new Promise<void>((resolve) => slow.close(() => resolve()));
});
