import { expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { grpcClient, grpcUpstream, unary, withAuthorization, type GrpcUpstream, type Msg } from '../support/grpc.js';

const BASIC = 'Basic ' + Buffer.from('alice:alice-pw').toString('base64');
let good: GrpcUpstream;
let bad: GrpcUpstream;

const gw = gatewayFixture({
  log: 'warn',
  before: async () => {
    good = await grpcUpstream();
    bad = await grpcUpstream();
    bad.serving = 'NOT_SERVING';
  },
  config: () => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, h2c: true },
    upstreams: {
      both: { targets: [good.url, bad.url], protocol: 'h2c', healthCheck: { path: '/grpc.health.v1.Health/Check', intervalMs: 100, timeoutMs: 1000 } },
    },
    routes: [{ path: '/test.Plain', upstream: 'both' }],
  }),
  after: async () => {
    await good.close();
    await bad.close();
  },
});

/** Resolves when the gateway has logged `message` for `target`. */
async function logged(message: string, target: string): Promise<void> {
  for (;;) {
    if (gw.logs.some((l) => l.includes(message) && l.includes(target))) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

it('an h2c upstream\'s targets are checked with grpc.health.v1: NOT_SERVING is out of rotation, SERVING back in', async () => {
  await logged('failed its health check', bad.url);
  const c = grpcClient('Plain', gw.port);
  const before = good.seen.length;
  for (let i = 0; i < 6; i++) expect((await unary<Msg>(c, 'Unary', { text: String(i) }, withAuthorization(BASIC))).text).toBe(`alice:${i}`);
  expect(good.seen.length - before).toBe(6);
  expect(bad.seen).toHaveLength(0);
  bad.serving = 'SERVING';
  await logged('healthy again', bad.url);
  for (let i = 0; i < 6; i++) await unary<Msg>(c, 'Unary', { text: String(i) }, withAuthorization(BASIC));
  expect(bad.seen.length).toBeGreaterThan(0);
  c.close();
});
