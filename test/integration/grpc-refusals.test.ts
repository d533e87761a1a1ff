import { connect as h2connect, createServer as createH2Server, type Http2Server, type IncomingHttpHeaders } from 'node:http2';
import { createServer as createTcpServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { grpc, grpcUpstream, type GrpcUpstream } from '../support/grpc.js';
import { TestPki } from '../support/tls-pki.js';

const BASIC = (user: string) => 'Basic ' + Buffer.from(`${user}:${user}-pw`).toString('base64');
let pki: TestPki;
let plain: GrpcUpstream;
/** An h2c server that takes every call and never answers. */
let silent: Http2Server;
let silentUrl: string;
/** A port nothing listens on. */
let downUrl: string;

async function freePort(): Promise<number> {
  const s = createTcpServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

const users = { alice: 'alice-pw', carol: 'carol-pw' };

const gw = gatewayFixture({
  users,
  log: 'info',
  before: async () => {
    pki = new TestPki();
    plain = await grpcUpstream();
    silent = createH2Server();
    silent.on('stream', () => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    downUrl = `http://127.0.0.1:${await freePort()}`;
  },
  config: () => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, tls: { certFile: pki.certFile, keyFile: pki.keyFile } },
    log: { level: 'info', access: true },
    rateLimit: { requests: 2, windowSeconds: 3600 },
    upstreams: {
      plain: { url: plain.url, protocol: 'h2c' },
      silent: { url: silentUrl, protocol: 'h2c', timeouts: { responseMs: 300 } },
      down: { url: downUrl, protocol: 'h2c' },
      patient: { url: silentUrl, protocol: 'h2c' },
    },
    routes: [
      { path: '/test.Plain', upstream: 'plain' },
      { path: '/test.Tls', upstream: 'plain', allow: { users: ['bob'] } },
      { path: '/silent.Svc', upstream: 'silent' },
      { path: '/down.Svc', upstream: 'down' },
      { path: '/limited.Svc', upstream: 'plain' },
      { path: '/patient.Svc', upstream: 'patient' },
    ],
  }),
  after: async () => {
    await plain.close();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
    pki.remove();
  },
});

/** A unary call to any path with a real grpc-js client over the TLS listener: the status it ended with. */
function call(path: string, authorization: string | undefined, options: grpc.CallOptions = {}, extra: Record<string, string> = {}): Promise<grpc.ServiceError | undefined> {
  const client = new grpc.Client(`127.0.0.1:${gw.port}`, grpc.credentials.createSsl(pki.ca));
  const md = new grpc.Metadata();
  if (authorization) md.set('authorization', authorization);
  for (const [k, v] of Object.entries(extra)) md.set(k, v);
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), md, options, (err) => {
      client.close();
      resolve(err ?? undefined);
    });
  });
}

describe('a gateway refusal of a gRPC call is a gRPC status (trailers-only), never a problem body', () => {
  it('no credentials: UNAUTHENTICATED, with the problem\'s detail as the message', async () => {
    const err = await call('/test.Plain/Unary', undefined);
    expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(err?.details).toMatch(/credentials/i);
  });

  it('a wrong password: UNAUTHENTICATED', async () => {
    const err = await call('/test.Plain/Unary', 'Basic ' + Buffer.from('alice:nope').toString('base64'));
    expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(err?.details).not.toMatch(/HTTP status/);
  });

  it('an allow rule that refuses the user: PERMISSION_DENIED', async () => {
    const err = await call('/test.Tls/Unary', BASIC('alice'));
    expect(err?.code).toBe(grpc.status.PERMISSION_DENIED);
    // The gateway's own reason, not the client's reading of an HTTP status.
    expect(err?.details).not.toMatch(/HTTP status/);
  });

  it('no route for the service: UNIMPLEMENTED', async () => {
    const err = await call('/nothing.Here/Call', BASIC('alice'));
    expect(err?.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(err?.details).not.toMatch(/HTTP status/);
  });

  it('a malformed request (Host differs from :authority): INVALID_ARGUMENT', async () => {
    const err = await call('/test.Plain/Unary', BASIC('alice'), {}, { host: 'elsewhere.example' });
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('past the rate limit: RESOURCE_EXHAUSTED', async () => {
    const codes: (number | undefined)[] = [];
    for (let i = 0; i < 3; i++) codes.push((await call('/limited.Svc/Call', BASIC('carol')))?.code);
    // The first two reach the upstream (which has no such service: UNIMPLEMENTED, its own answer).
    expect(codes).toEqual([grpc.status.UNIMPLEMENTED, grpc.status.UNIMPLEMENTED, grpc.status.RESOURCE_EXHAUSTED]);
    // The metrics carry the gRPC statuses, and the refusal is still counted as the rate limit's.
    const registry = gw.gateway.metrics.registry;
    const calls = await registry.getSingleMetricAsString('auth_gateway_grpc_calls_total');
    expect(calls).toContain('auth_gateway_grpc_calls_total{route="/limited.Svc",grpc_status="12"} 2');
    expect(calls).toContain('auth_gateway_grpc_calls_total{route="/limited.Svc",grpc_status="8"} 1');
    expect(await registry.getSingleMetricAsString('auth_gateway_rate_limited_total')).toContain('auth_gateway_rate_limited_total{route="/limited.Svc"} 1');
  });

  it('an upstream that refuses connections: UNAVAILABLE', async () => {
    const err = await call('/down.Svc/Call', BASIC('alice'));
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(err?.details).toMatch(/down service is unavailable/);
  });

  it('an upstream that does not answer within responseMs: DEADLINE_EXCEEDED, with the gateway\'s message', async () => {
    const err = await call('/silent.Svc/Call', BASIC('alice'));
    expect(err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(err?.details).toMatch(/did not answer within 300 ms/);
  });

  it('grpc-timeout bounds the upstream call below the route\'s timeouts: DEADLINE_EXCEEDED from the gateway', async () => {
    // A plain HTTP/2 client, so the deadline is the gateway's to enforce (a gRPC client would give up itself).
    const session = h2connect(`https://127.0.0.1:${gw.port}`, { ca: pki.ca, servername: '' });
    const stream = session.request({
      ':method': 'POST', ':path': '/patient.Svc/Call', 'content-type': 'application/grpc', te: 'trailers',
      'grpc-timeout': '200m', authorization: BASIC('alice'),
    });
    stream.end(Buffer.alloc(5));
    const started = Date.now();
    const headers = await new Promise<IncomingHttpHeaders>((resolve) => stream.on('response', resolve));
    stream.resume();
    await new Promise((resolve) => stream.on('close', resolve));
    session.close();
    expect(headers[':status']).toBe(200);
    expect(headers['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(decodeURIComponent(String(headers['grpc-message']))).toMatch(/grpc-timeout \(200m\)/);
    // The upstream's responseMs is 30 s.
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('the access line carries the gRPC status', async () => {
    await call('/nothing.Here/Call', BASIC('alice'));
    const line = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request' && l.path === '/nothing.Here/Call').pop();
    expect(line).toMatchObject({ grpcStatus: '12', code: 'not_found' });
  });
});
