import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokens, echoUpstream, htpasswd, postJson, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { waitForHttp } from '../support/process.js';
import { SENTINEL_MASTER_NAME, startSentinel, type TestSentinel } from '../support/redis-sentinel.js';
import { eventually, sleep } from './helpers.js';

/**
 * Sentinel: the master is killed under load. The gateway must follow the promotion (writes back within
 * a few seconds of it), lose no session it acknowledged (WAIT 1), and, when the old master comes back
 * empty on its old address, keep accepting valid tokens (a 401 there would start a refresh storm).
 */

let users: Users;
let pair: TestSentinel;
let echo: EchoUpstream;
let gw: RunningGateway;

beforeAll(async () => {
  users = htpasswd({ alice: 'alice-pw' });
  // Two replicas: after the failover one is left to acknowledge writes (store.waitForReplicas: 1).
  pair = await startSentinel({ replicas: 2, downAfterMs: 1000 });
  echo = await echoUpstream();
  gw = await startGateway(testConfig(users.file, {
    store: { kind: 'redis', sentinel: { name: SENTINEL_MASTER_NAME, sentinels: pair.sentinels }, commandTimeoutMs: 1000, connectTimeoutMs: 500 },
    upstreams: { up: { url: echo.url } },
    routes: [{ path: '/v1/conversations', upstream: 'up' }],
  }));
  await waitForHttp(`${gw.base}/readyz`);
}, 30_000);
afterAll(async () => {
  await gw?.close();
  await echo?.close();
  await pair?.destroy();
  users?.remove();
});

interface Sample {
  at: number;
  what: 'bearer' | 'create';
  status: number;
}

describe('Sentinel failover under load', () => {
  it('follows the promotion, loses no acknowledged session, and ignores the old master coming back empty', async () => {
    const acknowledged: Array<{ accessToken: string; refreshToken: string }> = [];
    for (let i = 0; i < 10; i++) acknowledged.push(await createTokens(gw.base, 'alice', 'alice-pw'));
    const samples: Sample[] = [];
    let running = true;
    const bearers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = w; running; i++) {
        const token = acknowledged[i % acknowledged.length]!.accessToken;
        const res = await fetch(`${gw.base}/v1/conversations`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(3000) });
        await res.arrayBuffer();
        samples.push({ at: Date.now(), what: 'bearer', status: res.status });
        await sleep(5);
      }
    });
    const creator = (async () => {
      while (running) {
        const res = await postJson(gw.base, '/v1/tokens/create', { appKey: 'alice', appSecret: 'alice-pw' });
        await res.arrayBuffer();
        samples.push({ at: Date.now(), what: 'create', status: res.status });
        await sleep(50);
      }
    })();
    try {
      await sleep(300);
      const oldPort = pair.master.port;
      const killedAt = Date.now();
      await pair.master.kill();
      expect(await eventually(async () => (await pair.masterPort()) !== oldPort, 15_000, 50)).toBe(true);
      const promotedAt = Date.now();
      expect(await eventually(() => samples.some((s) => s.what === 'create' && s.status === 200 && s.at > promotedAt), 5000, 20)).toBe(true);
      const writesBackAt = samples.find((s) => s.what === 'create' && s.status === 200 && s.at > promotedAt)!.at;
      console.log(`failover: promoted ${promotedAt - killedAt} ms after the kill; creates back ${writesBackAt - promotedAt} ms after the promotion`);
      expect(writesBackAt - promotedAt).toBeLessThan(4000);

      // The old master comes back on its address, empty, and is a master until Sentinel demotes it.
      const restartedAt = Date.now();
      await pair.master.start();
      await sleep(2500);
      const after = samples.filter((s) => s.what === 'bearer' && s.at > restartedAt);
      expect(after.length).toBeGreaterThan(50);
    } finally {
      running = false;
      await Promise.all([...bearers, creator]);
    }
    const summary = JSON.stringify(samples.reduce<Record<string, number>>((m, s) => ({ ...m, [`${s.what}:${s.status}`]: (m[`${s.what}:${s.status}`] ?? 0) + 1 }), {}));
    // Valid tokens: accepted or, during the switch, 503; never 401.
    expect(samples.filter((s) => s.what === 'bearer' && s.status !== 200 && s.status !== 503), summary).toEqual([]);
    expect(samples.filter((s) => s.what === 'create' && s.status !== 200 && s.status !== 503), summary).toEqual([]);
    // No acknowledged session was lost.
    for (const pairOfTokens of acknowledged) {
      expect((await fetch(`${gw.base}/v1/conversations`, { headers: { authorization: `Bearer ${pairOfTokens.accessToken}` } })).status).toBe(200);
    }
    const refreshed = await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: acknowledged[0]!.refreshToken });
    expect(refreshed.status).toBe(200);
    expect((await fetch(`${gw.base}/readyz`)).status).toBe(200);
  }, 45_000);
});
