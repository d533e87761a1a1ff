import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { basic, htpasswd, type Users } from '../support/fixtures.js';
import { loggedPort, waitForHttp, type Child } from '../support/process.js';
import { openRaw, requestText, type Conversation } from '../support/raw-client.js';
import {
  eventually, expectProblem, killIfRunning, requireBuiltCli, rssBytes, scriptedUpstream, send, sleep, startGatewayProcess,
  type ScriptedUpstream,
} from './helpers.js';

/**
 * Admission, on raw sockets against the built CLI: pipelined requests on one connection are handled one at
 * a time (Node parses them ahead; each used to open its own upstream connection), and the requests in
 * flight per upstream target are bounded (maxConnections + maxQueued; past it 503 with Retry-After).
 * Under floods of pipelining connections a legitimate user keeps getting answers and RSS stays bounded.
 */

const ALICE = basic('alice', 'alice-pw');

let users: Users;
let dir: string;
let upstream: ScriptedUpstream;
let child: Child | undefined;
let port = 0;
/** Upstream connections opened, and the most requests it had at once. */
let opened = 0;
let active = 0;
let maxActive = 0;

beforeAll(async () => {
  requireBuiltCli();
  users = htpasswd({ alice: 'alice-pw' });
  dir = mkdtempSync(join(tmpdir(), 'gw-rel-admission-'));
  upstream = await scriptedUpstream();
  upstream.server.on('connection', () => opened++);
});
afterEach(async () => {
  await killIfRunning(child);
  child = undefined;
});
afterAll(async () => {
  await killIfRunning(child);
  await upstream?.close();
  rmSync(dir, { recursive: true, force: true });
  users?.remove();
});

/** The upstream answers after `ms`, counting the requests it holds at once. */
function answerAfter(ms: number): void {
  upstream.handler = (_req, res) => {
    active++;
    maxActive = Math.max(maxActive, active);
    upstream.later(ms, () => {
      active--;
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
  };
}

async function start(limits: { maxConnections?: number; maxQueued?: number } = {}): Promise<Child> {
  child = startGatewayProcess({
    dir, port: 0, usersFile: users.file,
    upstreams: { list: { url: upstream.url, timeoutMs: 10_000, ...limits } },
    routes: [{ path: '/v1/list', upstream: 'list' }],
    // info: the start-up line names the port it got.
    logLevel: 'info',
  });
  port = await loggedPort(child);
  await waitForHttp(`http://127.0.0.1:${port}/healthz`, child);
  answerAfter(0);
  expect((await send(port, '/v1/list', { headers: { authorization: ALICE } })).status).toBe(200);
  opened = 0;
  maxActive = 0;
  return child;
}

async function bearer(): Promise<string> {
  const created = await send(port, '/v1/tokens/create', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }),
  });
  expect(created.status).toBe(200);
  return (JSON.parse(created.body.toString()) as { accessToken: string }).accessToken;
}

/** A raw connection that writes `count` pipelined GETs at once; unless `read`, it reads none of the answers. */
async function pipeline(count: number, authorization?: string, read = true): Promise<Conversation> {
  const c = await openRaw(port);
  if (!read) c.socket.pause();
  c.socket.write(requestText('GET', '/v1/list', { Host: 'gw', ...(authorization ? { Authorization: authorization } : {}) }).repeat(count));
  return c;
}

/** How many answers had each status. */
function statuses(c: Conversation): Map<number, number> {
  const out = new Map<number, number>();
  for (const r of c.responses()) out.set(r.status, (out.get(r.status) ?? 0) + 1);
  return out;
}

describe('pipelining', () => {
  it('200 pipelined Bearer GETs on one connection reach the upstream one at a time, on one upstream connection, all answered in order', async () => {
    await start();
    const token = await bearer();
    answerAfter(2);
    const p = await pipeline(200, `Bearer ${token}`);
    try {
      expect(await p.waitUntil(() => p.responses().length === 200, 10_000), `answered ${p.responses().length}`).toBe(true);
      expect(Object.fromEntries(statuses(p))).toEqual({ 200: 200 });
      // The old gateway: up to 200 at once, on as many upstream connections.
      expect(maxActive).toBe(1);
      // The connection the warm-up request left in the agent's pool, or one new one.
      expect(opened).toBeLessThanOrEqual(1);
    } finally {
      p.socket.destroy();
    }
  });
});

describe('per-target limit (maxConnections 4, maxQueued 4)', () => {
  it('30 requests at once on their own connections: at most 4 upstream connections, 8 admitted, the rest 503 service_unavailable with Retry-After', async () => {
    await start({ maxConnections: 4, maxQueued: 4 });
    // The upstream holds every answer until the 22 refusals are in: "at once" whatever the machine's
    // speed (a fixed 400 ms let a slow machine's later requests in after the first ones were done).
    const held: Array<() => void> = [];
    upstream.handler = (_req, res) => {
      active++;
      maxActive = Math.max(maxActive, active);
      held.push(() => {
        active--;
        res.setHeader('content-type', 'application/json');
        res.end('{}');
      });
    };
    let done = 0;
    const pending = Array.from({ length: 30 }, () => send(port, '/v1/list', { headers: { authorization: ALICE }, timeoutMs: 15_000 }).finally(() => done++));
    expect(await eventually(() => done >= 22, 10_000, 10)).toBe(true);
    await sleep(100);
    expect(done).toBe(22);
    // The queued four reach the upstream as places free: answered as they come.
    answerAfter(0);
    for (const release of held.splice(0)) release();
    const answers = await Promise.all(pending);
    const ok = answers.filter((a) => a.status === 200);
    const busy = answers.filter((a) => a.status === 503);
    expect(ok.length + busy.length).toBe(30);
    expect(ok.length).toBe(8);
    for (const a of busy) {
      expectProblem(a, 503, 'service_unavailable');
      expect(a.headers['retry-after']).toBe('1');
    }
    expect(maxActive).toBe(4);
    expect(opened).toBeLessThanOrEqual(4);
    // Room again once they are done.
    expect((await send(port, '/v1/list', { headers: { authorization: ALICE } })).status).toBe(200);
  });
});

describe('floods of pipelining connections that never read', () => {
  /**
   * A legitimate user's sequential requests while `flood` runs for durationMs (with `afterFirst`, for
   * durationMs from the first answer on, however long the flood's first stall held that one back):
   * latencies, statuses, peak RSS, and when each request started (ms after the first one; with
   * `afterFirst`, negative for the first).
   */
  async function underFlood(pid: number, authorization: string, durationMs: number, afterFirst = false): Promise<{ latencies: number[]; statuses: number[]; peakRss: number; started: number[] }> {
    const latencies: number[] = [];
    const started: number[] = [];
    const begin = Date.now();
    const statuses: number[] = [];
    let peakRss = rssBytes(pid);
    const sampler = setInterval(() => {
      try {
        peakRss = Math.max(peakRss, rssBytes(pid));
      } catch {
        // exited
      }
    }, 50);
    let until = Date.now() + durationMs;
    let origin = begin;
    try {
      while (Date.now() < until) {
        started.push(Date.now() - origin);
        const a = await send(port, '/v1/list', { headers: { authorization }, timeoutMs: 10_000 }).catch(() => undefined);
        latencies.push(a ? a.ms : 10_000);
        statuses.push(a?.status ?? 0);
        if (afterFirst && latencies.length === 1) {
          origin = Date.now();
          started[0] = begin - origin;
          until = origin + durationMs;
        }
        await sleep(20);
      }
    } finally {
      clearInterval(sampler);
    }
    return { latencies, statuses, peakRss, started };
  }

  const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]!;

  it('20 connections × 5,000 pipelined Bearer GETs: the user keeps getting answers (p99 < 1 s), RSS < 250 MB, at most 20 upstream connections', async () => {
    const gw = await start();
    const token = await bearer();
    answerAfter(1);
    const flood = await Promise.all(Array.from({ length: 20 }, () => pipeline(5000, `Bearer ${token}`, false)));
    try {
      await sleep(300);
      const { latencies, statuses, peakRss } = await underFlood(gw.proc.pid!, `Bearer ${token}`, 3000);
      const report = `latencies ${latencies.join(' ')}; requests ${latencies.length}, p99 ${p99(latencies)} ms, max ${Math.max(...latencies)} ms, peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MB, upstream connections ${opened}, most at once ${maxActive}`;
      console.log(`bearer flood: ${report}`);
      expect(statuses.every((s) => s === 200), report).toBe(true);
      expect(latencies.length, report).toBeGreaterThanOrEqual(5);
      expect(p99(latencies), report).toBeLessThan(1000);
      expect(peakRss, report).toBeLessThan(250 * 2 ** 20);
      // One at a time per flooding connection, plus the user's.
      expect(maxActive, report).toBeLessThanOrEqual(21);
      expect(opened, report).toBeLessThanOrEqual(21);
    } finally {
      for (const f of flood) f.socket.destroy();
    }
  });

  it('20 connections × 20,000 pipelined GETs without credentials: the user keeps getting answers (p99 < 1 s), RSS < 250 MB', async () => {
    const gw = await start();
    answerAfter(1);
    const flood = await Promise.all(Array.from({ length: 20 }, () => pipeline(20_000, undefined, false)));
    try {
      await sleep(300);
      // Node's parser reads each connection's first 64 KB (about 2,000 of these requests) in one go and
      // emits them all before anything can pause it: 20 such connections starting in the same instant stall
      // any Node server once (a bare http.Server: ~0.5 s; seconds on a loaded machine). From then on each
      // connection is read only as its answers go out, one request per event-loop turn: so the user's
      // requests are measured for 3 s from the first answer on, and judged from 700 ms after it.
      const { latencies, statuses, peakRss, started } = await underFlood(gw.proc.pid!, ALICE, 3000, true);
      const settled = latencies.filter((_, i) => started[i]! >= 700);
      const report = `latencies ${latencies.join(' ')}; requests ${latencies.length}, p99 after the first second ${p99(settled)} ms, max ${Math.max(...latencies)} ms, peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MB`;
      console.log(`unauthenticated flood: ${report}`);
      expect(statuses.every((s) => s === 200), report).toBe(true);
      expect(settled.length, report).toBeGreaterThanOrEqual(3);
      expect(p99(settled), report).toBeLessThan(1000);
      expect(peakRss, report).toBeLessThan(250 * 2 ** 20);
    } finally {
      for (const f of flood) f.socket.destroy();
    }
  });
});

describe('requests parsed behind an answer that closes the connection', () => {
  it('never run and hold no admission slot: 12 × (413 Connection: close + a pipelined Bearer GET) with maxConnections 2, maxQueued 2, then a GET still gets 200', async () => {
    await start({ maxConnections: 2, maxQueued: 2 });
    const token = await bearer();
    let reached = 0;
    upstream.handler = (_req, res) => {
      reached++;
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    };
    // The token endpoint refuses a body over its limit with 413 and Connection: close before reading it;
    // the GET behind it in the same packet was already parsed by Node.
    const big = 'x'.repeat(20_000);
    const packet = requestText('POST', '/v1/tokens/create', { Host: 'gw', 'Content-Type': 'application/json', 'Content-Length': big.length }, big) +
      requestText('GET', '/v1/list', { Host: 'gw', Authorization: `Bearer ${token}` });
    for (let i = 0; i < 12; i++) {
      const c = await openRaw(port);
      c.socket.write(packet);
      expect(await c.waitUntil(() => c.socket.destroyed || c.socket.readableEnded || /HTTP\/1\.1 413 /.test(c.text()), 5000)).toBe(true);
      await sleep(50);
      c.socket.destroy();
      // One answer per connection, the 413; the GET parsed behind it is never answered, nor forwarded.
      expect(c.text().match(/HTTP\/1\.1 \d{3} /g), c.text().slice(0, 200)).toEqual(['HTTP/1.1 413 ']);
    }
    expect(reached).toBe(0);
    // Each leaked slot would have stayed taken: with 4 per target, the 5th leak made every request a 503.
    const after = await send(port, '/v1/list', { headers: { authorization: `Bearer ${token}` } });
    expect(after.status).toBe(200);
  });
});
