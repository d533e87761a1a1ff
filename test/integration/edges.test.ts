import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { basic, gatewayFixture } from '../support/fixtures.js';

const gw = gatewayFixture({
  config: (f) => ({
    upstreams: { up: { url: f.echo.url, timeouts: { idleMs: 300 } } },
    // A catch-all route under /v1 must still never see /v1/tokens.
    routes: [{ path: '/v1', upstream: 'up' }],
  }),
});

const auth = { authorization: basic('alice', 'alice-pw') };

describe('edges', () => {
  it.each(['GET', 'POST'])('answers %s /v1/tokens itself with 404, never forwarding it', async (method) => {
    const before = gw.echo.received.length;
    const res = await fetch(`${gw.base}/v1/tokens`, { method, headers: auth });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { code: string }).code).toBe('not_found');
    expect(gw.echo.received.length).toBe(before);
    expect((await fetch(`${gw.base}/v1/tokensX`, { headers: auth })).status).toBe(200);
  });

  it('cuts a response whose body stalls for the upstream idle timeout', async () => {
    gw.echo.handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
    };
    try {
      const outcome = await new Promise<string>((resolve) => {
        const req = request(`${gw.base}/v1/stall`, { headers: auth, agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve('ended cleanly'));
          res.on('error', () => resolve('cut'));
          res.on('close', () => resolve(res.complete ? 'ended cleanly' : 'cut'));
        });
        req.on('error', () => resolve('cut'));
        req.end();
        setTimeout(() => resolve('still open'), 3000);
      });
      expect(outcome).toBe('cut');
    } finally {
      gw.echo.handler = (_req, res, r) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(r));
      };
    }
    expect((await fetch(`${gw.base}/v1/after`, { headers: auth })).status).toBe(200);
  });
});
