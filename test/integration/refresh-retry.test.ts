import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokens, gatewayFixture, postJson, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';

/**
 * Issue 16, finding 1, as reported: one Redis without replicas; gateway A (waitForReplicas 0) signs
 * sessions in, gateway B (waitForReplicas 1) gets their refreshes, all at once. Before: B's WAITs held
 * up the commands queued behind them on its one writer connection, 11 of 20 refreshes were answered 503
 * after Redis had rotated them, and each client's retry with the same token was taken for reuse (10 of
 * 11 sessions revoked). Now a refresh is never answered 503 for a replica it cannot have, a retry gets
 * the same successor, and every session lives on.
 */

type Pair = { accessToken: string; refreshToken: string };

const f = gatewayFixture({ redis: true, gateway: false });
let a: RunningGateway;
let b: RunningGateway;

const gateway = (waitForReplicas: number, extra: Record<string, unknown> = {}) => startGateway(testConfig(f.users.file, {
  store: { kind: 'redis', url: f.redis.url, waitForReplicas, ...extra },
  upstreams: { up: { url: f.echo.url } },
  routes: [{ path: '/v1/conversations', upstream: 'up' }],
}));
const bearer = (gw: RunningGateway, token: string) => fetch(`${gw.base}/v1/conversations`, { headers: { authorization: `Bearer ${token}` } });
const refresh = (gw: RunningGateway, refreshToken: string) => postJson(gw.base, '/v1/tokens/refresh', { refreshToken });

beforeAll(async () => {
  a = await gateway(0);
  b = await gateway(1);
});
afterAll(async () => {
  await a?.close();
  await b?.close();
});

describe('a refresh whose answer was lost', () => {
  it.each([20, 40])('%i concurrent refreshes on a gateway waiting for a replica that does not exist: none revoked, retries get the same pair', async (n) => {
    const sessions: Pair[] = [];
    for (let i = 0; i < n; i++) sessions.push(await createTokens(a.base, 'alice', 'alice-pw'));
    const answers = await Promise.all(sessions.map((s) => refresh(b, s.refreshToken)));
    const statuses = answers.map((r) => r.status);
    // Never an answer that lies: 200, or 503 for what a retry may repeat.
    expect(statuses.every((s) => s === 200 || s === 503), JSON.stringify(statuses)).toBe(true);
    const firsts = await Promise.all(answers.map(async (r) => (r.status === 200 ? ((await r.json()) as Pair) : undefined)));
    // Every client retries as if it had not got the answer, on the other gateway.
    const retries = await Promise.all(sessions.map((s) => refresh(a, s.refreshToken)));
    expect(retries.map((r) => r.status), `first answers: ${JSON.stringify(statuses)}`).toEqual(Array(n).fill(200));
    const pairs = (await Promise.all(retries.map((r) => r.json()))) as Pair[];
    pairs.forEach((p, i) => {
      if (firsts[i]) expect(p.refreshToken).toBe(firsts[i]!.refreshToken);
    });
    // Every session alive, on one chain: the pair works, and so does its next refresh.
    for (const p of pairs) expect((await bearer(b, p.accessToken)).status).toBe(200);
    expect((await Promise.all(pairs.map((p) => refresh(b, p.refreshToken)))).map((r) => r.status)).toEqual(Array(n).fill(200));
    expect(statuses.filter((s) => s === 503)).toEqual([]);
  }, 30_000);

  it('two tabs refreshing one token at once both end with a working pair on one live chain', async () => {
    const first = await createTokens(a.base, 'alice', 'alice-pw');
    const [x, y] = await Promise.all([refresh(a, first.refreshToken), refresh(b, first.refreshToken)]);
    expect([x.status, y.status]).toEqual([200, 200]);
    const [px, py] = (await Promise.all([x.json(), y.json()])) as Pair[];
    expect(px!.refreshToken).toBe(py!.refreshToken);
    expect((await bearer(a, px!.accessToken)).status).toBe(200);
    expect((await bearer(b, py!.accessToken)).status).toBe(200);
    // One tab goes on; the other's copy of the same token, used once the chain has moved on, is reuse.
    const next = (await (await refresh(a, px!.refreshToken)).json()) as Pair;
    expect((await refresh(b, next.refreshToken)).status).toBe(200);
    expect((await refresh(b, py!.refreshToken)).status).toBe(401);
    expect((await bearer(a, next.accessToken)).status).toBe(401);
  });
});

describe('store.durability strict', () => {
  it('refuses session writes while replicas are missing, before writing anything; the same token works once they may be written', async () => {
    const strict = await gateway(1, { durability: 'strict' });
    try {
      const session = await createTokens(a.base, 'alice', 'alice-pw');
      // The replica count is looked at once a second: from then on, refused before anything is written.
      let res = await refresh(strict, session.refreshToken);
      for (let i = 0; i < 30 && res.status === 200; i++) {
        await new Promise((r) => setTimeout(r, 100));
        res = await refresh(strict, session.refreshToken);
      }
      expect(res.status).toBe(503);
      expect(((await res.json()) as { code: string }).code).toBe('store_unavailable');
      expect((await postJson(strict.base, '/v1/tokens/create', { appKey: 'alice', appSecret: 'alice-pw' })).status).toBe(503);
      // Nothing was applied: the same token, on a gateway that does not wait, rotates (a retry or the first rotation, not reuse).
      expect((await refresh(a, session.refreshToken)).status).toBe(200);
    } finally {
      await strict.close();
    }
  }, 15_000);
});
