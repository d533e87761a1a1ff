import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, htpasswd, type Users } from '../support/fixtures.js';
import { loggedPort, waitForHttp, type Child } from '../support/process.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { requireTool, run } from '../e2e/support/tools.js';
import { parsePrometheus, sampleValue } from '../support/prometheus.js';
import {
  eventually, expectProblem, exited, killIfRunning, refused, requireBuiltCli, scriptedUpstream, send, sleep, startGatewayProcess,
  type ScriptedUpstream,
} from './helpers.js';
import { wrk } from './wrk.js';

/**
 * server.workers: 2 against the built CLI: two worker processes share the port (and a Redis), a worker
 * that dies is replaced, and SIGTERM to the primary drains every worker (in-flight requests finish) and
 * exits 0. The primary serves the admin listener: one scrape sums every worker's series, /readyz speaks
 * for all of them, and wrk's keep-alive load runs through SIGTERM without a reset.
 */

const ALICE = { authorization: basic('alice', 'alice-pw') };

let users: Users;
let dir: string;
let upstream: ScriptedUpstream;
let redis: TestRedis;
let child: Child | undefined;

beforeAll(async () => {
  requireBuiltCli();
  users = htpasswd({ alice: 'alice-pw' });
  dir = mkdtempSync(join(tmpdir(), 'gw-rel-workers-'));
  upstream = await scriptedUpstream();
  redis = await startRedis();
});
afterAll(async () => {
  if (child?.proc.pid) for (const pid of workerPids(child.proc.pid)) process.kill(pid, 'SIGKILL');
  await killIfRunning(child);
  await upstream?.close();
  await redis?.destroy();
  rmSync(dir, { recursive: true, force: true });
  users?.remove();
});

function workerPids(primary: number): number[] {
  try {
    return execFileSync('ps', ['--ppid', String(primary), '-o', 'pid='], { encoding: 'utf8' }).split('\n').map((l) => Number(l.trim())).filter((n) => n > 0);
  } catch {
    return [];
  }
}

/** How many workers have logged that they listen. */
function listeningLines(c: Child): number {
  return c.output().match(/"msg":"auth-gateway listening"/g)?.length ?? 0;
}

describe('server.workers: 2, a start that cannot succeed', () => {
  it('exits 1 and says so when the workers cannot listen (the port is taken), instead of starting them again and again', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    const c = startGatewayProcess({
      dir, port, usersFile: users.file, workers: 2, store: { kind: 'redis', url: redis.url }, upstreams: { up: { url: upstream.url } }, routes: [{ path: '/v1/up', upstream: 'up' }],
    });
    try {
      expect(await exited(c, 15_000)).toEqual({ code: 1, signal: null });
      expect(c.output()).toContain('EADDRINUSE');
      expect(c.output()).toContain('"msg":"a worker failed to start; stopping"');
      expect(c.output()).not.toContain('"msg":"worker died; starting another"');
    } finally {
      await killIfRunning(c);
      await new Promise((resolve) => taken.close(resolve));
    }
  }, 30_000);
});

describe('server.workers: 2', () => {
  it('serves from two processes, replaces a dead one, and drains both on SIGTERM', async () => {
    child = startGatewayProcess({
      dir, port: 0, usersFile: users.file, shutdownGraceMs: 5000, acceptGraceMs: 0, workers: 2, store: { kind: 'redis', url: redis.url },
      upstreams: { slow: { url: upstream.url, timeoutMs: 10_000 } },
      routes: [{ path: '/v1/slow', upstream: 'slow' }],
    });
    const primary = child.proc.pid!;
    // Every worker listens on the one port node:cluster's primary took for port 0.
    const port = await loggedPort(child, 'auth-gateway listening', 20_000);
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, child, 20_000);
    // Both workers listen (one that answered /healthz may be the only one yet: killing it would close the port).
    expect(await eventually(() => listeningLines(child!) === 2, 10_000, 50), child.output()).toBe(true);
    expect(workerPids(primary)).toHaveLength(2);
    expect((await send(port, '/v1/slow', { headers: ALICE })).status).toBe(200);
    // A token made by one worker is good on the other (fresh connections go round the workers).
    const created = await send(port, '/v1/tokens/create', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }),
    });
    const { accessToken } = JSON.parse(created.body.toString()) as { accessToken: string };
    const bearers = await Promise.all(Array.from({ length: 6 }, () => send(port, '/v1/slow', { headers: { authorization: `Bearer ${accessToken}` } })));
    expect(bearers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);

    // A worker crashes: the other keeps serving and the primary starts a replacement.
    const [victim] = workerPids(primary);
    process.kill(victim!, 'SIGKILL');
    // (A connection the primary hands to the worker in the instant it dies is lost: node:cluster's limit.)
    expect(await eventually(() => child!.output().includes('"msg":"worker died; starting another"'), 3000, 10)).toBe(true);
    expect((await send(port, '/v1/slow', { headers: ALICE })).status).toBe(200);
    expect(await eventually(() => workerPids(primary).length === 2 && !workerPids(primary).includes(victim!), 5000, 50)).toBe(true);
    expect(await eventually(() => listeningLines(child!) === 3, 10_000, 50), child.output()).toBe(true);

    // Requests in flight on both workers (fresh connections spread over them), then SIGTERM to the primary.
    upstream.handler = (_req, res) => upstream.later(800, () => res.end('{"slow":true}'));
    const hits = upstream.hits;
    const inFlight = Array.from({ length: 6 }, () => send(port, '/v1/slow', { headers: ALICE, timeoutMs: 6000 }));
    expect(await eventually(() => upstream.hits === hits + 6, 3000, 5)).toBe(true);
    const workers = workerPids(primary);
    const exit = exited(child, 8000);
    child.proc.kill('SIGTERM');
    expect(await eventually(() => refused(port), 1000, 10)).toBe(true);
    const answers = await Promise.all(inFlight);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    // The processes' log says which worker did not drain cleanly, if one did not.
    expect(await exit, child.output()).toEqual({ code: 0, signal: null });
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
    expect(child.output()).toContain('"msg":"all workers stopped"');
    expect(child.output().match(/"msg":"stopped"/g)).toHaveLength(2);
  }, 45_000);
});

describe('server.workers: 2, the admin listener and the drain', () => {
  it('one /metrics scrape sums both workers (promtool passes it); SIGTERM (accept grace 2 s): /readyz 503 on both listeners, wrk through the signal sees no reset', async () => {
    child = startGatewayProcess({
      dir, port: 0, adminPort: 0, usersFile: users.file, shutdownGraceMs: 5000, acceptGraceMs: 2000, workers: 2, store: { kind: 'redis', url: redis.url },
      upstreams: { slow: { url: upstream.url, timeoutMs: 10_000 } },
      routes: [{ path: '/v1/slow', upstream: 'slow' }],
    });
    const primary = child.proc.pid!;
    const port = await loggedPort(child, 'auth-gateway listening', 20_000);
    const adminPort = await loggedPort(child, 'admin listening', 20_000);
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, child, 20_000);
    await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, child, 20_000);
    expect(await eventually(() => listeningLines(child!) === 2, 10_000, 50), child.output()).toBe(true);
    expect(workerPids(primary)).toHaveLength(2);
    upstream.handler = (_req, res) => res.end('{}');

    // 200 requests on fresh connections: the primary hands them round the workers.
    const answers: number[] = [];
    for (let i = 0; i < 20; i++) {
      answers.push(...(await Promise.all(Array.from({ length: 10 }, () => send(port, '/v1/slow', { headers: ALICE })))).map((a) => a.status));
    }
    expect(answers.filter((s) => s === 200)).toHaveLength(200);
    const series = { route: '/v1/slow', method: 'GET', status_class: '2xx', auth: 'basic' };
    for (let i = 0; i < 3; i++) {
      const text = (await send(adminPort, '/metrics')).body.toString();
      // Every scrape the same sum: both workers' counts, whichever connection the scrape came on.
      expect(sampleValue(parsePrometheus(text), 'auth_gateway_requests_total', series), text).toBe(200);
      expect(sampleValue(parsePrometheus(text), 'auth_gateway_store_up')).toBe(1);
      if (i === 0) {
        const checked = await run(requireTool('promtool'), ['check', 'metrics'], { input: text, timeoutMs: 10_000 });
        expect(`${checked.stdout}${checked.stderr}`).toBe('');
        expect(checked.code).toBe(0);
      }
    }
    expect((await send(adminPort, '/readyz')).status).toBe(200);

    const load = wrk(`http://127.0.0.1:${port}/v1/slow`, { connections: 16, durationS: 8, headers: { Authorization: ALICE.authorization } });
    await sleep(800);
    const signalled = Date.now();
    const exit = exited(child, 12_000);
    child.proc.kill('SIGTERM');
    expect(await eventually(async () => (await send(adminPort, '/readyz')).status === 503, 500, 10)).toBe(true);
    expectProblem(await send(adminPort, '/readyz'), 503, 'service_unavailable');
    // Each worker hears it from the primary.
    expect(await eventually(async () => {
      const answers = await Promise.all([send(port, '/readyz'), send(port, '/readyz'), send(port, '/readyz'), send(port, '/readyz')]);
      return answers.every((a) => a.status === 503);
    }, 500, 10)).toBe(true);
    // At once: long before the end of the accept grace.
    expect(Date.now() - signalled).toBeLessThan(1200);
    expect((await send(port, '/v1/slow', { headers: ALICE })).status).toBe(200);
    expect(await eventually(() => refused(port), 4000, 20)).toBe(true);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(1950);
    // The port is closed: wrk's reconnections are refused from now on; stop it (see wrk.ts).
    await sleep(100);
    load.stop();
    const result = await load.result;
    // A reset is a read error in wrk; a refused reconnection after the close counts as a write error (see shutdown.test.ts).
    expect(result.requests, result.output).toBeGreaterThan(200);
    expect(result.read, result.output).toBe(0);
    expect(result.timeout, result.output).toBe(0);
    expect(result.non2xx, result.output).toBe(0);
    expect(await exit).toEqual({ code: 0, signal: null });
  }, 45_000);
});

describe('server.workers: 2, a worker dies between scrapes', () => {
  it('the summed requests_total never decreases: the primary keeps what the dead worker counted', async () => {
    child = startGatewayProcess({
      dir, port: 0, adminPort: 0, usersFile: users.file, shutdownGraceMs: 2000, acceptGraceMs: 0, workers: 2, store: { kind: 'redis', url: redis.url },
      upstreams: { slow: { url: upstream.url, timeoutMs: 10_000 } },
      routes: [{ path: '/v1/slow', upstream: 'slow' }],
    });
    const primary = child.proc.pid!;
    const port = await loggedPort(child, 'auth-gateway listening', 20_000);
    const adminPort = await loggedPort(child, 'admin listening', 20_000);
    await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, child, 20_000);
    expect(await eventually(() => listeningLines(child!) === 2, 10_000, 50), child.output()).toBe(true);
    upstream.handler = (_req, res) => res.end('{}');
    const series = { route: '/v1/slow', method: 'GET', status_class: '2xx', auth: 'basic' };
    const total = async () => sampleValue(parsePrometheus((await send(adminPort, '/metrics')).body.toString()), 'auth_gateway_requests_total', series) ?? 0;
    const load = async (n: number) => {
      for (let i = 0; i < n / 10; i++) await Promise.all(Array.from({ length: 10 }, () => send(port, '/v1/slow', { headers: ALICE })));
    };
    await load(100);
    const before = await total();
    expect(before).toBe(100);
    const [victim] = workerPids(primary);
    process.kill(victim!, 'SIGKILL');
    expect(await eventually(() => listeningLines(child!) === 3, 10_000, 50), child.output()).toBe(true);
    const after = await total();
    console.log(`requests_total summed: ${before} before a worker was killed, ${after} after its replacement started`);
    expect(after).toBeGreaterThanOrEqual(before);
    await load(20);
    expect(await total()).toBe(after + 20);
    const exit = exited(child, 8000);
    child.proc.kill('SIGTERM');
    expect((await exit).code).toBe(0);
  }, 45_000);
});
