import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, htpasswd, type Users } from '../support/fixtures.js';
import { freePort, waitForHttp, type Child } from '../support/process.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { eventually, exited, killIfRunning, refused, requireBuiltCli, scriptedUpstream, send, startGatewayProcess, type ScriptedUpstream } from './helpers.js';

/**
 * server.workers: 2 against the built CLI: two worker processes share the port (and a Redis), a worker
 * that dies is replaced, and SIGTERM to the primary drains every worker (in-flight requests finish) and
 * exits 0.
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

describe('server.workers: 2', () => {
  it('serves from two processes, replaces a dead one, and drains both on SIGTERM', async () => {
    const port = await freePort();
    child = startGatewayProcess({
      dir, port, usersFile: users.file, shutdownGraceMs: 5000, workers: 2, store: { kind: 'redis', url: redis.url },
      upstreams: { slow: { url: upstream.url, timeoutMs: 10_000 } },
      routes: [{ path: '/v1/slow', upstream: 'slow' }],
    });
    const primary = child.proc.pid!;
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, child);
    expect(await eventually(() => workerPids(primary).length === 2, 5000, 50)).toBe(true);
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
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, child);

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
    expect(await exit).toEqual({ code: 0, signal: null });
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
    expect(child.output()).toContain('"msg":"all workers stopped"');
    expect(child.output().match(/"msg":"stopped"/g)).toHaveLength(2);
  }, 30_000);
});
