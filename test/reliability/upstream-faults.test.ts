import { mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, gatewayFixture } from '../support/fixtures.js';
import { loggedPort, waitForHttp, type Child } from '../support/process.js';
import { request } from '../support/raw-client.js';
import {
  eventually, expectProblem, killIfRunning, requireBuiltCli, rssBytes, scriptedUpstream, send, sleep, startGatewayProcess,
  type Answer, type ScriptedUpstream,
} from './helpers.js';

/**
 * Upstreams that refuse, hang, reset, cut their body or crowd the gateway: every client gets an answer
 * (or a visibly cut stream), the gateway stays up, and its keep-alive agent neither leaks nor stays broken.
 */

const ALICE = { authorization: basic('alice', 'alice-pw') };
/** The gateway agent's idle timeout (src/proxy/forward.ts AGENT_IDLE_MS). */
const AGENT_IDLE_MS = 4000;
const MB = 1024 * 1024;

let faulty: ScriptedUpstream;
let hanging: ScriptedUpstream;
let pool: ScriptedUpstream;
/** Requests the hanging upstream holds, with whether the gateway tore them down. */
const held: { req: IncomingMessage; res: ServerResponse; closedAt?: number }[] = [];

const gw = gatewayFixture({
  echo: false,
  before: async () => {
    faulty = await scriptedUpstream();
    hanging = await scriptedUpstream();
    hanging.handler = (req, res) => {
      const h: (typeof held)[number] = { req, res };
      held.push(h);
      res.once('close', () => (h.closedAt = Date.now()));
    };
    pool = await scriptedUpstream();
  },
  config: () => ({
    upstreams: {
      down: { url: 'http://127.0.0.1:1', timeoutMs: 2000 },
      hanging: { url: hanging.url, timeoutMs: 300 },
      faulty: { url: faulty.url, timeoutMs: 3000 },
      pool: { url: pool.url, timeoutMs: 3000 },
    },
    routes: [
      { path: '/v1/down', upstream: 'down' },
      { path: '/v1/hanging', upstream: 'hanging' },
      { path: '/v1/faulty', upstream: 'faulty' },
      { path: '/v1/pool', upstream: 'pool' },
    ],
  }),
  after: async () => {
    for (const up of [faulty, hanging, pool]) await up?.close();
  },
});

beforeAll(async () => {
  // Basic is verified once (bcrypt) and cached: later requests measure the proxy, not bcrypt.
  expect((await send(gw.port, '/v1/faulty', { headers: ALICE })).status).toBe(200);
});

const ok = (_req: IncomingMessage, res: ServerResponse) => {
  res.setHeader('content-type', 'application/json');
  res.end('{"ok":true}');
};

describe('upstream failures become answers', () => {
  it('refused (nothing listens) → 502 bad_gateway problem, fast', async () => {
    const a = await send(gw.port, '/v1/down', { headers: ALICE });
    expectProblem(a, 502, 'bad_gateway');
    expect(a.ms).toBeLessThan(1000);
  });

  it('no answer within timeoutMs (300 ms) → 504 gateway_timeout within ~1 s, and the upstream request is torn down', async () => {
    const before = held.length;
    const a = await send(gw.port, '/v1/hanging', { headers: ALICE, timeoutMs: 3000 });
    expectProblem(a, 504, 'gateway_timeout');
    expect(a.ms).toBeGreaterThanOrEqual(290);
    expect(a.ms).toBeLessThan(1000);
    expect(held.length).toBe(before + 1);
    // The gateway does not leave the upstream working for nobody.
    expect(await eventually(() => held[before]!.closedAt !== undefined, 1000)).toBe(true);
    expect(await eventually(async () => (await hanging.connections()) === 0, 1000)).toBe(true);
  });

  it('several timeouts at once → all 504, none waits for another', async () => {
    const answers = await Promise.all(Array.from({ length: 10 }, () => send(gw.port, '/v1/hanging', { headers: ALICE, timeoutMs: 3000 })));
    for (const a of answers) {
      expectProblem(a, 504, 'gateway_timeout');
      expect(a.ms).toBeLessThan(1500);
    }
  });

  it('reset before the headers → 502 bad_gateway problem', async () => {
    faulty.handler = (req) => req.socket.destroy();
    try {
      const a = await send(gw.port, '/v1/faulty', { headers: ALICE });
      expectProblem(a, 502, 'bad_gateway');
    } finally {
      faulty.handler = ok;
    }
    expect((await send(gw.port, '/v1/faulty', { headers: ALICE })).status).toBe(200);
  });

  for (const framing of ['content-length', 'chunked'] as const) {
    it(`reset mid-body (${framing}) → the client sees a cut stream, never a clean short body; the next request succeeds`, async () => {
      faulty.handler = (_req, res) => {
        res.writeHead(200, framing === 'content-length'
          ? { 'content-type': 'application/octet-stream', 'content-length': String(MB) }
          : { 'content-type': 'application/octet-stream' });
        res.write(Buffer.alloc(64 * 1024, 1));
        faulty.later(50, () => res.socket?.destroy());
      };
      let a: Answer;
      try {
        a = await send(gw.port, '/v1/faulty', { headers: ALICE, timeoutMs: 3000 });
      } finally {
        faulty.handler = ok;
      }
      expect(a.status).toBe(200);
      expect(a.bytes).toBeLessThan(MB);
      expect(a.bodyError, `the client got ${a.bytes} bytes and a clean end`).toBeDefined();
      expect(a.ms).toBeLessThan(1000);
      // The agent dropped the broken socket: the next request over it works.
      for (let i = 0; i < 3; i++) {
        const next = await send(gw.port, '/v1/faulty', { headers: ALICE });
        expect(next.status).toBe(200);
        expect(next.body.toString()).toBe('{"ok":true}');
      }
    });
  }

  it('the upstream dies while the client uploads nothing and waits: the gateway answers 502 and stays up', async () => {
    // An upstream that accepts, reads the request and closes without a word (e.g. crashed worker).
    faulty.handler = (_req, res) => res.socket?.end();
    try {
      expectProblem(await send(gw.port, '/v1/faulty', { headers: ALICE }), 502, 'bad_gateway');
    } finally {
      faulty.handler = ok;
    }
    expect(gw.gateway.server.listening).toBe(true);
    expect((await send(gw.port, '/v1/faulty', { headers: ALICE })).status).toBe(200);
  });
});

describe('many clients of a slow upstream, and the keep-alive pool', () => {
  const CLIENTS = 50;

  it('answers 50 concurrent clients of a 300 ms upstream, all 200, concurrently; upstream sockets never exceed 50', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    pool.handler = (_req, res) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      pool.later(300, () => {
        inFlight--;
        ok(_req, res);
      });
    };
    let maxConnections = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        maxConnections = Math.max(maxConnections, await pool.connections());
        await sleep(20);
      }
    })();
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: CLIENTS }, () => send(gw.port, '/v1/pool', { headers: ALICE, timeoutMs: 5000 })));
    const took = Date.now() - started;
    sampling = false;
    await sampler;
    expect(answers.map((a) => a.status)).toEqual(Array(CLIENTS).fill(200));
    expect(answers.every((a) => a.body.toString() === '{"ok":true}')).toBe(true);
    // In parallel, not queued behind each other (50 × 300 ms would be 15 s).
    expect(took).toBeLessThan(2500);
    expect(maxInFlight).toBeGreaterThan(CLIENTS / 2);
    expect(maxConnections).toBeLessThanOrEqual(CLIENTS);
    // Afterwards the agent keeps them pooled, never more than were needed at once.
    const pooled = await pool.connections();
    expect(pooled).toBeGreaterThan(0);
    expect(pooled).toBeLessThanOrEqual(CLIENTS);
    // A second wave reuses the pool instead of opening 50 more.
    const hitsBefore = pool.hits;
    const again = await Promise.all(Array.from({ length: CLIENTS }, () => send(gw.port, '/v1/pool', { headers: ALICE, timeoutMs: 5000 })));
    expect(again.every((a) => a.status === 200)).toBe(true);
    expect(pool.hits - hitsBefore).toBe(CLIENTS);
    expect(await pool.connections()).toBeLessThanOrEqual(CLIENTS);
    pool.handler = ok;
  });

  it('recovers when the upstream restarts on the same port while the pool holds its old sockets', async () => {
    expect(await pool.connections()).toBeGreaterThan(0);
    await pool.close();
    // While it is down: 502, not a hang.
    expectProblem(await send(gw.port, '/v1/pool', { headers: ALICE }), 502, 'bad_gateway');
    await pool.reopen();
    pool.handler = ok;
    for (let i = 0; i < 5; i++) {
      const a = await send(gw.port, '/v1/pool', { headers: ALICE });
      expect(a.status, `request ${i} after the restart: ${a.body.toString()}`).toBe(200);
    }
    // Concurrent ones too (several fresh sockets).
    const wave = await Promise.all(Array.from({ length: 10 }, () => send(gw.port, '/v1/pool', { headers: ALICE })));
    expect(wave.map((a) => a.status)).toEqual(Array(10).fill(200));
  });

  it('leaks no sockets: the gateway closes idle upstream sockets after its agent idle timeout (4 s), and client sockets at once', async () => {
    // Every upstream above keeps idle sockets open for 30 s: only the gateway's agent can close them this soon.
    const started = Date.now();
    const drained = await eventually(async () => {
      const counts = await Promise.all([faulty.connections(), hanging.connections(), pool.connections()]);
      return counts.every((n) => n === 0);
    }, AGENT_IDLE_MS + 1500, 100);
    const counts = await Promise.all([faulty.connections(), hanging.connections(), pool.connections()]);
    expect(drained, `upstream connections still open after ${Date.now() - started} ms: faulty ${counts[0]}, hanging ${counts[1]}, pool ${counts[2]}`).toBe(true);
    // Clients used fresh connections (agent: false); the gateway holds none of them.
    const clientSide = await new Promise<number>((resolve, reject) => gw.gateway.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
    expect(clientSide).toBe(0);
    // And the gateway still works afterwards.
    expect((await send(gw.port, '/v1/pool', { headers: ALICE })).status).toBe(200);
  });
});

describe('a 100 MB response through the gateway process', () => {
  let dir: string;
  let big: ScriptedUpstream;
  let child: Child | undefined;

  beforeAll(() => {
    requireBuiltCli();
    dir = mkdtempSync(join(tmpdir(), 'gw-rel-big-'));
  });
  afterAll(async () => {
    await killIfRunning(child);
    await big?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('streams all of it to the client with backpressure, and the gateway RSS stays flat (< 50 MB growth)', async () => {
    const TOTAL = 100 * MB;
    const CHUNK = Buffer.alloc(64 * 1024, 0x61);
    let upstreamSent = 0;
    big = await scriptedUpstream();
    big.handler = (req, res) => {
      const size = new URL(req.url!, 'http://x').searchParams.get('bytes');
      const total = size ? Number(size) : TOTAL;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
      let sent = 0;
      const pump = () => {
        while (sent < total) {
          const n = Math.min(CHUNK.length, total - sent);
          sent += n;
          upstreamSent += n;
          if (!res.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    };
    child = startGatewayProcess({
      dir, port: 0, usersFile: gw.users.file,
      upstreams: { big: { url: big.url, timeoutMs: 5000 } },
      routes: [{ path: '/v1/big', upstream: 'big' }],
      // info: the start-up line names the port it got.
      logLevel: 'info',
    });
    const port = await loggedPort(child);
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, child);
    const pid = child.proc.pid!;

    // Warm up (bcrypt, JIT, first sockets), then take the baseline.
    for (let i = 0; i < 5; i++) expect((await send(port, `/v1/big?bytes=${MB}`, { headers: ALICE, countOnly: true })).bytes).toBe(MB);
    await sleep(200);
    const baseline = rssBytes(pid);

    let peak = baseline;
    let peakDuringPause = 0;
    let received = 0;
    /** Bytes the upstream wrote during the last 500 ms of the client's pause. */
    let sentLateInPause = -1;
    let sentWhenPauseEnded = 0;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, rssBytes(pid));
      } catch {
        // the process is gone: the assertions below say so
      }
    }, 20);
    let paused = false;
    const answer = await request(port, '/v1/big', {
      headers: ALICE, keepBody: false, timeoutMs: 15_000,
      onBody: (c, socket) => {
        received += c.length;
        // A reader that stalls for 1.5 s at 10 MB: the gateway must stop reading the upstream, not buffer it.
        // (Loopback TCP buffers here may hold tens of MB (tcp_rmem max 32 MB), so the upstream runs on until
        // those are full; then it must stall.)
        if (!paused && received >= 10 * MB) {
          paused = true;
          socket.pause();
          let mark = 0;
          setTimeout(() => (mark = upstreamSent), 1000);
          setTimeout(() => {
            sentLateInPause = upstreamSent - mark;
            sentWhenPauseEnded = upstreamSent;
            peakDuringPause = rssBytes(pid);
            socket.resume();
          }, 1500);
        }
      },
    }).finally(() => clearInterval(sampler));
    const result = { status: answer.status, bytes: answer.bytes, complete: answer.bodyError === undefined, ms: answer.ms };
    const growthMb = (peak - baseline) / MB;
    console.log(`100 MB in ${result.ms} ms; gateway RSS baseline ${(baseline / MB).toFixed(1)} MB, peak ${(peak / MB).toFixed(1)} MB (+${growthMb.toFixed(1)} MB), `
      + `${(peakDuringPause / MB).toFixed(1)} MB at the end of the client's pause; the upstream had sent ${(sentWhenPauseEnded / MB).toFixed(1)} MB by then, `
      + `${(sentLateInPause / 1024).toFixed(0)} KB in the pause's last 500 ms`);

    expect(result.status).toBe(200);
    expect(result.complete).toBe(true);
    expect(result.bytes).toBe(TOTAL);
    expect(growthMb).toBeLessThan(50);
    // Backpressure reached the upstream: while the client read nothing, the upstream stalled once the
    // socket buffers were full, far from the end of the body, and the gateway did not hold the difference.
    expect(sentWhenPauseEnded).toBeLessThan(TOTAL);
    expect(sentLateInPause).toBeGreaterThanOrEqual(0);
    expect(sentLateInPause).toBeLessThan(MB);
    expect((peakDuringPause - baseline) / MB).toBeLessThan(50);
    expect(child.proc.exitCode).toBeNull();
  });
});
