import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recipe } from '../../src/recipes/recipes.js';
import { basic, gatewayFixture } from '../support/fixtures.js';
import { grpc, grpcClient, grpcUpstream, unary, withAuthorization, type GrpcUpstream, type Msg } from '../support/grpc.js';
import { startCaddy, type Caddy } from './support/caddy.js';

/**
 * gRPC through the front door: a real gRPC client (grpc-js) to real Caddy running the generated recipe
 * (its clients on h2c, as the recipe's warning says to allow), which asks the gateway and passes the call
 * on over HTTP/2 to a real gRPC server: the call with credentials reaches it with the identity, one
 * without is refused with the gateway's 401 as UNAUTHENTICATED and never reaches it.
 */
let upstream: GrpcUpstream;
let caddy: Caddy;

const gw = gatewayFixture({
  before: async () => {
    upstream = await grpcUpstream();
  },
  config: () => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 500, trustProxy: 1 },
    forwardAuth: { path: '/auth/verify', trustedProxies: ['127.0.0.1'] },
    upstreams: { plain: { url: upstream.url, protocol: 'h2c' } },
    routes: [{ path: '/test.Plain', upstream: 'plain' }],
  }),
  after: () => upstream?.close(),
});

beforeAll(async () => {
  caddy = await startCaddy((port) => recipe('caddy', gw.gateway.config, { listen: `127.0.0.1:${port}`, gateway: gw.base }, 'test').text, '\tservers {\n\t\tprotocols h1 h2 h2c\n\t}\n');
}, 30_000);
afterAll(() => caddy?.stop());

describe('Caddy on the generated recipe, in front of an h2c gRPC upstream', () => {
  it('a call with credentials reaches the upstream with the identity; its answer comes back', async () => {
    const client = grpcClient('Plain', caddy.port);
    try {
      const answer = await unary<Msg>(client, 'Unary', { text: 'through caddy' }, withAuthorization(basic('alice', 'alice-pw')));
      expect(answer.text).toBe('alice:through caddy');
      const md = upstream.seen.at(-1)!;
      expect(md.get('authorization')).toEqual([]);
      expect(md.get('x-authenticated-via')).toEqual(['basic']);
    } finally {
      client.close();
    }
  });

  it('a call without credentials is UNAUTHENTICATED and never reaches the upstream', async () => {
    const client = grpcClient('Plain', caddy.port);
    const before = upstream.seen.length;
    try {
      const err = await unary<Msg>(client, 'Unary', { text: 'anonymous' }).then(() => undefined, (e: grpc.ServiceError) => e);
      expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(upstream.seen.length).toBe(before);
    } finally {
      client.close();
    }
  });
});
