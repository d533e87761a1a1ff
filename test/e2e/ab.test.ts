import { describe, expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { requireTool, run } from './support/tools.js';

/**
 * ApacheBench with -k speaks HTTP/1.0 with `Connection: keep-alive`: every response must keep the
 * connection (and say so, framed by Content-Length), the gateway's own and the forwarded ones alike.
 */

let ab: string;
const gw = gatewayFixture({
  before: () => {
    ab = requireTool('ab');
  },
  config: (f) => ({
    upstreams: { echo: { url: f.echo.url } },
    routes: [{ path: '/v1/echo', upstream: 'echo' }],
  }),
});

async function bench(path: string): Promise<{ complete: number; failed: number; keepAlive: number; non2xx: number }> {
  const r = await run(ab, ['-k', '-n', '200', '-c', '4', '-A', 'alice:alice-pw', `http://127.0.0.1:${gw.port}${path}`], { timeoutMs: 20_000 });
  if (r.code !== 0) throw new Error(`ab exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  const read = (label: string) => Number(new RegExp(`^${label}:\\s+(\\d+)`, 'm').exec(r.stdout)?.[1] ?? 0);
  return { complete: read('Complete requests'), failed: read('Failed requests'), keepAlive: read('Keep-Alive requests'), non2xx: read('Non-2xx responses') };
}

describe('ab -k (HTTP/1.0 keep-alive) through the gateway', () => {
  it('keeps every connection alive on the gateway\'s own answers (/healthz)', async () => {
    expect(await bench('/healthz')).toEqual({ complete: 200, failed: 0, keepAlive: 200, non2xx: 0 });
  });

  it('keeps every connection alive on forwarded answers', async () => {
    expect(await bench('/v1/echo')).toEqual({ complete: 200, failed: 0, keepAlive: 200, non2xx: 0 });
  });
});
