import { describe, expect, it } from 'vitest';
import { basic, gatewayFixture } from '../support/fixtures.js';
import { openRaw, requestText } from '../support/raw-client.js';
import { eventually } from '../reliability/helpers.js';

/**
 * How deep a client may pipeline (server.maxPipelinedRequests): requests parsed ahead wait their turn up to
 * the limit; past it the connection closes after the answer in progress and nothing behind it runs.
 */

const ALICE = basic('alice', 'alice-pw');
const LIMIT = 5;

const gw = gatewayFixture({
  log: 'warn',
  config: (f) => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, maxPipelinedRequests: LIMIT },
    upstreams: { list: { url: f.echo.url } },
    routes: [{ path: '/v1/list', upstream: 'list' }],
  }),
});

const get = (n: number) => requestText('GET', `/v1/list/${n}`, { Host: 'gw', Authorization: ALICE });

describe('pipelining depth', () => {
  it(`${LIMIT} requests waiting behind the one in progress are all answered, in order, and the connection stays open`, async () => {
    const before = gw.echo.received.length;
    const c = await openRaw(gw.port);
    try {
      c.socket.write(Array.from({ length: LIMIT + 1 }, (_, i) => get(i + 1)).join(''));
      expect(await c.waitUntil(() => c.responses().length === LIMIT + 1, 5000), c.text().slice(0, 500)).toBe(true);
      const answers = c.responses();
      expect(answers.map((r) => r.status)).toEqual(Array(LIMIT + 1).fill(200));
      expect(answers.map((r) => (JSON.parse(r.body) as { url: string }).url)).toEqual(
        Array.from({ length: LIMIT + 1 }, (_, i) => `/v1/list/${i + 1}`),
      );
      expect(answers.every((r) => r.headers.connection?.[0] !== 'close')).toBe(true);
      expect(await c.closedWithin(200)).toBe(false);
      expect(gw.echo.received.length - before).toBe(LIMIT + 1);
    } finally {
      c.socket.destroy();
    }
  });

  it('one more than that: the answer in progress says Connection: close, the connection closes, and no request behind it reaches the upstream', async () => {
    // The first request is held upstream so that the rest are parsed while it is in progress.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    gw.echo.handler = (_req, res, r) => {
      void held.then(() => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(r));
      });
    };
    const before = gw.echo.received.length;
    const c = await openRaw(gw.port);
    try {
      c.socket.write(Array.from({ length: LIMIT + 2 }, (_, i) => get(i + 1)).join(''));
      expect(await eventually(() => gw.echo.received.length - before === 1, 5000)).toBe(true);
      release();
      expect(await c.closedWithin(5000), c.text().slice(0, 500)).toBe(true);
      const answers = c.responses();
      expect(answers).toHaveLength(1);
      expect(answers[0]!.status).toBe(200);
      expect(answers[0]!.headers.connection).toEqual(['close']);
      expect(gw.echo.received.length - before).toBe(1);
      // Told once, to the log and the metrics, whatever the client had sent behind it.
      const warnings = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'connection closed: too many pipelined requests waiting');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 'warn', peer: '127.0.0.1', maxPipelinedRequests: LIMIT });
      expect((await gw.gateway.metrics.pipeliningOverflows.get()).values[0]?.value).toBe(1);
    } finally {
      c.socket.destroy();
      gw.echo.handler = (_req, res, r) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(r));
      };
    }
  });

  it('past the limit after the head of the answer in progress is out: that answer ends whole, then the connection closes', async () => {
    // The head goes out at once, the body waits: too late for Connection: close, so the connection is ended
    // once the body is written.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    gw.echo.handler = (_req, res, r) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(' ');
      void held.then(() => res.end(JSON.stringify(r)));
    };
    const before = gw.echo.received.length;
    const c = await openRaw(gw.port);
    try {
      c.socket.write(get(1));
      expect(await c.waitUntil(() => c.text().includes('HTTP/1.1 200'), 5000)).toBe(true);
      c.socket.write(Array.from({ length: LIMIT + 1 }, (_, i) => get(i + 2)).join(''));
      expect(await eventually(async () => (await gw.gateway.metrics.pipeliningOverflows.get()).values[0]?.value === 2, 5000)).toBe(true);
      expect(await c.closedWithin(200)).toBe(false);
      release();
      expect(await c.closedWithin(5000), c.text().slice(0, 500)).toBe(true);
      const answers = c.responses();
      expect(answers).toHaveLength(1);
      expect(answers[0]!.status).toBe(200);
      expect(answers[0]!.headers.connection).toEqual(['keep-alive']); // the head was out before the limit was passed
      expect((JSON.parse(answers[0]!.body) as { url: string }).url).toBe('/v1/list/1');
      expect(gw.echo.received.length - before).toBe(1);
    } finally {
      c.socket.destroy();
      gw.echo.handler = (_req, res, r) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(r));
      };
    }
  });

  it('a new connection is served as usual afterwards', async () => {
    const res = await fetch(`${gw.base}/v1/list`, { headers: { authorization: ALICE } });
    expect(res.status).toBe(200);
  });
});
