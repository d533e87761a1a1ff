import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokens, echoUpstream, htpasswd, postJson, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { waitForHttp } from '../support/process.js';
import { startSentinel, type TestSentinel } from '../support/redis-sentinel.js';

/**
 * Redis WAIT blocks the connection it is sent on. A master whose one replica hangs (SIGSTOP: still
 * "connected" for Redis until repl-timeout) makes every WAIT run to its timeout. Before, the waits sat
 * on the one connection that carried every session write, so writes queued behind them missed their
 * deadline and were answered 503 although Redis ran them. Now the waits have their own connection and
 * coalesce: every create and refresh is answered 200 (acknowledged without the replica), and requests
 * that only read are not slowed at all.
 */

type Pair = { accessToken: string; refreshToken: string };
let users: Users;
let group: TestSentinel;
let echo: EchoUpstream;
let gw: RunningGateway;

beforeAll(async () => {
  users = htpasswd({ alice: 'alice-pw' });
  group = await startSentinel({ replicas: 1 });
  echo = await echoUpstream();
  gw = await startGateway(testConfig(users.file, {
    store: { kind: 'redis', url: group.master.url, waitForReplicas: 1, commandTimeoutMs: 500 },
    upstreams: { up: { url: echo.url } },
    routes: [{ path: '/v1/conversations', upstream: 'up' }],
  }));
  await waitForHttp(`${gw.base}/readyz`);
}, 30_000);
afterAll(async () => {
  group?.replicas[0]?.resume();
  await gw?.close();
  await echo?.close();
  await group?.destroy();
  users?.remove();
});

describe('a hung replica', () => {
  it('never holds up another caller: 40 creates and 40 refreshes at once all answered 200, reads stay fast', async () => {
    const sessions: Pair[] = [];
    for (let i = 0; i < 40; i++) sessions.push(await createTokens(gw.base, 'alice', 'alice-pw'));
    group.replicas[0]!.pause();
    const reads: number[] = [];
    let writing = true;
    const reader = (async () => {
      while (writing) {
        const started = performance.now();
        const res = await fetch(`${gw.base}/v1/conversations`, { headers: { authorization: `Bearer ${sessions[0]!.accessToken}` } });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        reads.push(performance.now() - started);
      }
    })();
    const started = performance.now();
    const answers = await Promise.all([
      ...sessions.map(() => postJson(gw.base, '/v1/tokens/create', { appKey: 'alice', appSecret: 'alice-pw' })),
      ...sessions.map((s) => postJson(gw.base, '/v1/tokens/refresh', { refreshToken: s.refreshToken })),
    ]);
    const took = performance.now() - started;
    writing = false;
    await reader;
    const statuses = answers.map((r) => r.status);
    reads.sort((x, y) => x - y);
    console.log(`hung replica: 80 writes in ${took.toFixed(0)} ms; reads meanwhile: ${reads.length}, median ${reads[reads.length >> 1]?.toFixed(1)} ms, max ${reads.at(-1)?.toFixed(1)} ms`);
    expect(statuses.filter((s) => s !== 200), JSON.stringify(statuses)).toEqual([]);
    // Waits coalesce: 80 writes cost a few rounds of WAIT (400 ms each, as sign-ins trickle in), not 80
    // one after another (32 s); reads never wait behind them. Slack for a busy machine.
    expect(took).toBeLessThan(10_000);
    expect(reads[reads.length >> 1]!).toBeLessThan(250);
  }, 30_000);
});
