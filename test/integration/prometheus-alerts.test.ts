import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createTokens, gatewayFixture } from '../support/fixtures.js';
import { startPrometheus, type TestPrometheus } from '../support/prometheus-server.js';

const ROOT = join(import.meta.dirname, '../..');
const RULES = join(ROOT, 'deploy/prometheus/rules.yml');
const DASHBOARD = join(ROOT, 'deploy/grafana/auth-gateway.json');

interface Panel {
  title: string;
  targets?: Array<{ expr: string }>;
}
const dashboardExpressions = (JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] }).panels
  .flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/**
 * A real Prometheus scraping a real gateway (its admin listener) every second, with the shipped rules:
 * what an operator deploys, on a real redis-server the test stops and starts.
 */
const gw = gatewayFixture({
  redis: true,
  config: (f) => ({
    store: { kind: 'redis', url: f.redis.url, commandTimeoutMs: 300 },
    upstreams: { up: { url: f.echo.url } },
    routes: [{ path: '/v1/items', upstream: 'up' }],
  }),
  setupTimeoutMs: 30_000,
});
let prometheus: TestPrometheus;
beforeAll(async () => {
  const admin = await gw.gateway.listenAdmin(0, '127.0.0.1');
  prometheus = await startPrometheus({ job: 'auth-gateway', targets: [`127.0.0.1:${admin}`], ruleFiles: [RULES] });
}, 60_000);
afterAll(async () => {
  await prometheus?.stop();
});

/** Some of everything the dashboard shows: proxied requests, refusals, token calls (store writes). */
async function traffic(): Promise<void> {
  const alice = { authorization: basic('alice', 'alice-pw') };
  await createTokens(gw.base, 'alice', 'alice-pw');
  for (let i = 0; i < 5; i++) {
    expect((await fetch(`${gw.base}/v1/items`, { headers: alice })).status).toBe(200);
    expect((await fetch(`${gw.base}/v1/items`)).status).toBe(401);
  }
}

const storeAlert = async () => (await prometheus.alerts()).find((a) => a.labels.alertname === 'AuthGatewayStoreUnavailable');

describe('a real Prometheus with the shipped rules and dashboard', () => {
  it('evaluates every expression of the Grafana dashboard: each parses and returns series', async () => {
    expect(dashboardExpressions.length).toBeGreaterThan(20);
    await expect.poll(() => prometheus.targetsUp(), { timeout: 20_000, interval: 250 }).toBe(true);
    // The recording rules need two scrapes of the traffic (rates over them).
    await traffic();
    await expect.poll(async () => (await prometheus.query('route:auth_gateway_request_duration_seconds:p99_5m{route="/v1/items"}')).length, { timeout: 20_000, interval: 500 }).toBe(1);
    await traffic();
    const empty: string[] = [];
    for (const { panel, expr } of dashboardExpressions) {
      const series = await prometheus.query(expr);
      if (series.length === 0) empty.push(`${panel}: ${expr}`);
    }
    expect(empty).toEqual([]);
  }, 60_000);

  it('fires AuthGatewayStoreUnavailable when the store stops, and resolves it when the store is back', async () => {
    expect(await storeAlert()).toBeUndefined();
    await gw.redis.stop();
    // `for: 30s` of store_up == 0: pending, then firing.
    await expect.poll(async () => (await storeAlert())?.state, { timeout: 60_000, interval: 1000 }).toBe('firing');
    const firing = (await storeAlert())!;
    expect(firing.labels).toMatchObject({ severity: 'critical', job: 'auth-gateway' });
    expect(firing.annotations.runbook_url).toBe('docs/operating.md#authgatewaystoreunavailable');
    await gw.redis.start();
    await expect.poll(async () => await storeAlert(), { timeout: 30_000, interval: 1000 }).toBeUndefined();
    expect((await prometheus.query('auth_gateway_store_up'))[0]!.value[1]).toBe('1');
  }, 120_000);
});
