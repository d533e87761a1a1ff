import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { basic, createTokens, gatewayFixture, postJson, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';
import { waitForHttp } from '../support/process.js';
import { startCluster, type TestCluster } from '../support/redis-cluster.js';

/** Two gateway instances on a real 3-master Redis Cluster: every token operation, across instances. */

// user0-user11 for the checks below; user12-user41 spread the first test's sessions, so that none of them
// is used more than twice (four requests, the rate limit's burst) however long the sessions take to reach
// every master.
const names = Array.from({ length: 42 }, (_, i) => `user${i}`);
let cluster: TestCluster;
const f = gatewayFixture({
  users: Object.fromEntries(names.map((n) => [n, `${n}-pw`])),
  gateway: false,
  before: async () => {
    cluster = await startCluster(3);
  },
  after: () => cluster?.destroy(),
  setupTimeoutMs: 30_000,
});
let a: RunningGateway;
let b: RunningGateway;

const config = () => testConfig(f.users.file, {
  // A generous deadline: this file is about behaviour across instances, not about timeouts, and a busy
  // 2-core machine can stall a command past the default.
  store: { kind: 'redis', cluster: { nodes: [cluster.urls[0]] }, commandTimeoutMs: 2000 },
  lockout: { maxFailuresPerUser: 3, addressBurst: 1000, windowSeconds: 60 },
  rateLimit: { requests: 4, windowSeconds: 60 },
  upstreams: { up: { url: f.echo.url } },
  routes: [{ path: '/v1/conversations', upstream: 'up' }],
});

beforeAll(async () => {
  a = await startGateway(config());
  b = await startGateway(config());
  await waitForHttp(`${a.base}/readyz`);
  await waitForHttp(`${b.base}/readyz`);
});
afterAll(async () => {
  await a?.close();
  await b?.close();
});

const bearer = (gw: RunningGateway, token: string) => fetch(`${gw.base}/v1/conversations`, { headers: { authorization: `Bearer ${token}` } });
const refresh = (gw: RunningGateway, refreshToken: string) => postJson(gw.base, '/v1/tokens/refresh', { refreshToken });

describe('two gateways on a Redis Cluster', () => {
  it('creates on one, uses, refreshes and detects reuse on the other, with sessions on every master', async () => {
    const sessions: Array<{ first: { refreshToken: string }; next: { accessToken: string; refreshToken: string } }> = [];
    const raws = cluster.nodes.map((n) => new Redis(n.url));
    const perNode = async () => Promise.all(raws.map(async (r) => (await r.keys('gw:ss:*')).length));
    try {
      // Sessions live in their users' hashes: go on until every master holds some (8 at least, 60 at most).
      for (let i = 0; i < 60 && (i < 8 || (await perNode()).includes(0)); i++) {
        // user0 and user1 once only: they are checked below, under a rate limit of 4 requests a minute.
        const user = i < 2 ? names[i]! : names[12 + ((i - 2) % 30)]!;
        const pair = await createTokens(a.base, user, `${user}-pw`);
        expect((await bearer(b, pair.accessToken)).status).toBe(200);
        const res = await refresh(b, pair.refreshToken);
        expect(res.status).toBe(200);
        const next = (await res.json()) as { accessToken: string; refreshToken: string };
        expect((await bearer(a, next.accessToken)).status).toBe(200);
        sessions.push({ first: pair, next });
      }
      expect(await perNode()).not.toContain(0);
    } finally {
      for (const r of raws) r.disconnect();
    }
    // Reuse of a rotated-away token whose successor was used, on A, revokes the session for B at once.
    const { first, next } = sessions[0]!;
    expect((await refresh(b, next.refreshToken)).status).toBe(200);
    expect((await refresh(a, first.refreshToken)).status).toBe(401);
    expect((await bearer(b, next.accessToken)).status).toBe(401);
    expect((await refresh(b, next.refreshToken)).status).toBe(401);
    // Revoke on B; A refuses at once.
    const other = sessions[1]!.next;
    expect((await bearer(a, other.accessToken)).status).toBe(200);
    expect((await postJson(b.base, '/v1/tokens/revoke', { token: other.accessToken, type: 'ACCESS_TOKEN' })).status).toBe(200);
    expect((await bearer(a, other.accessToken)).status).toBe(401);
  });

  it('shares the lockout and the rate limit between instances', async () => {
    const user = names[10]!;
    for (const gw of [a, b, a]) {
      expect((await postJson(gw.base, '/v1/tokens/create', { appKey: user, appSecret: 'wrong' })).status).toBe(401);
    }
    expect((await postJson(b.base, '/v1/tokens/create', { appKey: user, appSecret: `${user}-pw` })).status).toBe(429);

    const limited = names[11]!;
    const statuses = [];
    for (const gw of [a, b, a, b, a]) {
      statuses.push((await fetch(`${gw.base}/v1/conversations`, { headers: { authorization: basic(limited, `${limited}-pw`) } })).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429]);
  });

  it('is ready on cluster_state:ok', async () => {
    expect((await fetch(`${a.base}/readyz`)).status).toBe(200);
  });
});

describe('a single-node url pointing at one node of a cluster', () => {
  it('is not ready, answers 503 (never 401), and logs the cause (MOVED) once', async () => {
    const lines: Array<{ msg: string; cause?: string }> = [];
    const log = createLogger('info', (line) => lines.push(JSON.parse(line) as { msg: string; cause?: string }));
    const wrong = await startGateway(testConfig(f.users.file, { store: { kind: 'redis', url: cluster.urls[0] } }), { log });
    try {
      await waitForHttp(`${wrong.base}/readyz`, undefined, 5000, 503);
      const statuses = [];
      for (const user of names.slice(0, 6)) {
        statuses.push((await postJson(wrong.base, '/v1/tokens/create', { appKey: user, appSecret: `${user}-pw` })).status);
      }
      // Some users' keys happen to live on that node; the others must fail closed, not half-work silently.
      expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);
      expect(statuses).toContain(503);
      const outages = lines.filter((l) => l.msg.startsWith('redis unavailable'));
      expect(outages).toHaveLength(1);
      expect(outages[0]!.cause).toBe('MOVED');
    } finally {
      await wrong.close();
    }
  });
});
