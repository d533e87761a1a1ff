import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createTokens, echoUpstream, htpasswd, postJson, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { waitForHttp } from '../support/process.js';
import { SENTINEL_MASTER_NAME, startSentinel, type TestSentinel } from '../support/redis-sentinel.js';
import { eventually, sleep } from './helpers.js';

/**
 * Issue 16, finding 2: Sentinel with a master and ONE replica, defaults (store.waitForReplicas 1). The
 * master is killed: the replica is promoted and has no replica of its own. Before, sign-ins were 0%
 * until the old master came back (every create waited for a replica that did not exist, then 503), and
 * /readyz flapped as creates queued behind the waits. Now (store.durability: available, the default)
 * sign-ins come back with the promotion, acknowledged without a replica: one warning, the replica gauge
 * at 0, the writes counted as unreplicated; /readyz stays 200 throughout.
 */

let users: Users;
let pair: TestSentinel;
let echo: EchoUpstream;
let gw: RunningGateway;
const lines: Array<{ level: string; msg: string }> = [];

beforeAll(async () => {
  users = htpasswd({ alice: 'alice-pw' });
  pair = await startSentinel({ replicas: 1, downAfterMs: 1000 });
  echo = await echoUpstream();
  gw = await startGateway(testConfig(users.file, {
    store: { kind: 'redis', sentinel: { name: SENTINEL_MASTER_NAME, sentinels: pair.sentinels }, commandTimeoutMs: 500, connectTimeoutMs: 500 },
    upstreams: { up: { url: echo.url } },
    routes: [{ path: '/v1/conversations', upstream: 'up' }],
    admin: { host: '127.0.0.1', port: 0 },
  }), { log: createLogger('info', (l) => lines.push(JSON.parse(l) as { level: string; msg: string })) });
  await waitForHttp(`${gw.base}/readyz`);
}, 30_000);
afterAll(async () => {
  await gw?.close();
  await echo?.close();
  await pair?.destroy();
  users?.remove();
});

async function scrape(): Promise<string> {
  const body = await gw.gateway.metrics.registry.metrics();
  return body;
}

describe('Sentinel, master and one replica: the master dies', () => {
  it('keeps signing in after the promotion (acknowledged without a replica), /readyz steady, one warning', async () => {
    // A session the replica acknowledged before the kill (its survival is checked at the end). Right
    // after start-up a replica that reports online may still miss WAIT's deadline (the write is then
    // acknowledged without it, as store.durability available says): sign in until one write is replicated.
    const replicated = () => gw.gateway.store.replication?.()?.outcomes.replicated ?? 0;
    let before: Awaited<ReturnType<typeof createTokens>> | undefined;
    for (let i = 0; i < 20 && !before; i++) {
      const count = replicated();
      const pair = await createTokens(gw.base, 'alice', 'alice-pw');
      if (replicated() > count) before = pair;
      else await sleep(200);
    }
    if (!before) throw new Error(`no sign-in was replicated: ${JSON.stringify(gw.gateway.store.replication?.())}`);
    const samples: Array<{ at: number; what: 'create' | 'ready'; status: number }> = [];
    let running = true;
    const creators = Array.from({ length: 4 }, async () => {
      while (running) {
        const res = await postJson(gw.base, '/v1/tokens/create', { appKey: 'alice', appSecret: 'alice-pw' });
        await res.arrayBuffer();
        samples.push({ at: Date.now(), what: 'create', status: res.status });
        await sleep(20);
      }
    });
    const ready = (async () => {
      while (running) {
        const res = await fetch(`${gw.base}/readyz`);
        await res.arrayBuffer();
        samples.push({ at: Date.now(), what: 'ready', status: res.status });
        await sleep(50);
      }
    })();
    let promotedAt = 0;
    let linesBeforeKill = 0;
    try {
      await sleep(300);
      const oldPort = pair.master.port;
      // What is logged from the kill on (on a busy machine the replica may still be syncing when the
      // gateway starts: that start-up gap has its own warning and its own "back" line, before this).
      linesBeforeKill = lines.length;
      await pair.master.kill();
      expect(await eventually(async () => (await pair.masterPort()) !== oldPort, 15_000, 50)).toBe(true);
      promotedAt = Date.now();
      // Sign-ins are back within a second or so of the promotion, and stay back. (They once did not come
      // back at all, in about one run of three: ioredis ended a client that the failover detector
      // disconnected while it was asking the sentinels for the master; see src/stores/redis/clients.ts.)
      const back = await eventually(() => samples.some((s) => s.what === 'create' && s.status === 200 && s.at > promotedAt), 10_000, 20);
      expect(back, JSON.stringify(samples.filter((s) => s.at > promotedAt).slice(-10))).toBe(true);
      await sleep(3000);
    } finally {
      running = false;
      await Promise.all([...creators, ready]);
    }
    const summary = JSON.stringify(samples.reduce<Record<string, number>>((m, s) => ({ ...m, [`${s.what}:${s.status}`]: (m[`${s.what}:${s.status}`] ?? 0) + 1 }), {}));
    const backAt = samples.find((s) => s.what === 'create' && s.status === 200 && s.at > promotedAt)!.at;
    const settled = samples.filter((s) => s.what === 'create' && s.at > backAt + 500);
    console.log(`one replica: creates back ${backAt - promotedAt} ms after the promotion; ${summary}`);
    expect(settled.length, summary).toBeGreaterThan(20);
    expect(settled.every((s) => s.status === 200), summary).toBe(true);
    // /readyz: 200 once the new master is there, whatever the creates do.
    // (a second to settle: a readiness probe already on its way to the old master when the first create got through)
    expect(samples.filter((s) => s.what === 'ready' && s.at > backAt + 1000 && s.status !== 200), summary).toEqual([]);
    // One warning that says what is happening; no "available again" while it is not.
    const warnings = lines.slice(linesBeforeKill).filter((l) => l.msg.includes('fewer replicas than store.waitForReplicas'));
    expect(warnings.map((l) => l.msg), JSON.stringify(lines)).toEqual([
      'redis has fewer replicas than store.waitForReplicas: session writes are acknowledged without them (store.durability available) until they return',
    ]);
    const metrics = await scrape();
    expect(metrics).toMatch(/^auth_gateway_store_replicas_connected 0$/m);
    expect(Number(/^auth_gateway_store_session_writes_total\{replication="unreplicated"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(20);
    // The session acknowledged before the kill (WAIT 1) survived it.
    expect((await fetch(`${gw.base}/v1/conversations`, { headers: { authorization: `Bearer ${before.accessToken}` } })).status).toBe(200);
  }, 45_000);
});
