import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createH2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { UpstreamConfig } from '../../src/config/types.js';
import { silentLogger } from '../../src/log.js';
import type { ForwardOutcome, UpstreamErrorKind } from '../../src/proxy/forward.js';
import { Http2Forwarder } from '../../src/proxy/h2-upstream.js';
import { closedPort } from '../support/process.js';
import { exchangeUntilClosed } from '../support/raw-client.js';

/**
 * The Http2Forwarder alone, on raw sockets: a bare node:http front hands each request to forward(), and a
 * real h2c upstream records the paths it was asked for.
 */
const open: Array<{ close(): void }> = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

async function h2cUpstream(): Promise<{ url: string; paths: string[] }> {
  const paths: string[] = [];
  const server = createH2Server();
  server.on('stream', (stream, headers) => {
    paths.push(String(headers[':path']));
    stream.respond({ ':status': 200 });
    stream.end('ok');
  });
  open.push({ close: () => server.close() });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, paths };
}

function upstreamConfig(targets: string[]): UpstreamConfig {
  return {
    url: targets[0]!, targets, protocol: 'h2c', balance: 'round-robin', cooldownMs: 1000, timeouts: { connectMs: 500, responseMs: 2000, idleMs: 2000 },
    preserveHost: false, maxConnections: 8, maxQueued: 8, maxTunnels: 8,
  };
}

async function front(up: UpstreamConfig, clock: ManualClock): Promise<{ port: number; errors: UpstreamErrorKind[] }> {
  const errors: UpstreamErrorKind[] = [];
  const forwarder = new Http2Forwarder({ up }, silentLogger, (_name, kind) => errors.push(kind), clock);
  open.push({ close: () => forwarder.close() });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const outcome: ForwardOutcome = { requestId: 'r', problem: undefined, cut: undefined };
    void forwarder.forward(req, res, { upstream: 'up', timeouts: up.timeouts, strippedPrefix: undefined }, outcome);
  });
  open.push({ close: () => server.close() });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, errors };
}

describe('the h2 engine\'s pools', () => {
  it('take the clock they are given: a target that refused is skipped for the cool-down, and tried again once the clock passed it', async () => {
    const clock = new ManualClock();
    const up = await h2cUpstream();
    const down = `http://127.0.0.1:${await closedPort()}`;
    const f = await front(upstreamConfig([down, up.url]), clock);
    const get = (path: string) => exchangeUntilClosed(f.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n`);
    // Round-robin starts at the refusing target: refused, sent again to the other one.
    expect(await get('/1')).toMatch(/^HTTP\/1\.1 200 /);
    expect(f.errors).toEqual(['refused']);
    // The cool-down as the clock reads it: however long the requests take, the clock has not moved.
    for (const path of ['/2', '/3']) expect(await get(path)).toMatch(/^HTTP\/1\.1 200 /);
    expect(f.errors).toEqual(['refused']);
    clock.advance(1000);
    for (const path of ['/4', '/5']) expect(await get(path)).toMatch(/^HTTP\/1\.1 200 /);
    expect(f.errors).toEqual(['refused', 'refused']);
    expect(up.paths).toEqual(['/1', '/2', '/3', '/4', '/5']);
  });
});
