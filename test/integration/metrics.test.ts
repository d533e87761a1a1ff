import { createServer, type Server } from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { basic, createTokens, gatewayFixture, postJson, startGateway, testConfig } from '../support/fixtures.js';
import { requireTool, run } from '../e2e/support/tools.js';
import { closedPort } from '../support/process.js';
import { parsePrometheus, sampleValue, type Sample } from '../support/prometheus.js';
import { exchangeUntilClosed } from '../support/raw-client.js';

let silent: Server;
let refusing: number;
let admin: string;
const gw = gatewayFixture({
  users: { alice: 'alice-pw', bob: 'bob-pw' },
  before: async () => {
    // An upstream that never answers: the gateway's own timeout (504).
    silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    refusing = await closedPort();
  },
  config: (f) => ({
    lockout: { maxFailuresPerUser: 2, addressBurst: 100 },
    upstreams: {
      up: { url: f.echo.url },
      gone: { url: `http://127.0.0.1:${refusing}` },
      slow: { url: `http://127.0.0.1:${(silent.address() as { port: number }).port}`, timeoutMs: 200 },
      narrow: { url: `http://127.0.0.1:${(silent.address() as { port: number }).port}`, maxConnections: 1, timeouts: { responseMs: 30_000 } },
    },
    routes: [
      { path: '/v1/items', upstream: 'up', paging: true },
      { path: '/v1/limited', upstream: 'up', rateLimit: { requests: 1, windowSeconds: 60 } },
      { path: '/v1/gone', upstream: 'gone' },
      { path: '/v1/slow', upstream: 'slow' },
      { path: '/v1/narrow', upstream: 'narrow' },
    ],
  }),
  after: () => {
    silent?.closeAllConnections();
    silent?.close();
  },
});
beforeAll(async () => {
  admin = `http://127.0.0.1:${await gw.gateway.listenAdmin(0, '127.0.0.1')}`;
});

const scrape = async (base = admin): Promise<Sample[]> => {
  const res = await fetch(`${base}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheus(await res.text());
};
/** Bytes on a socket, for request targets fetch will not send; resolves with what came back. */
const rawRequest = (port: string, bytes: string) => exchangeUntilClosed(Number(port), bytes);
const alice = { authorization: basic('alice', 'alice-pw') };

describe('the admin listener', () => {
  it('serves /healthz and /readyz with the public checks, and nothing else', async () => {
    expect(await (await fetch(`${admin}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${admin}/readyz`)).json()).toEqual({ status: 'ready' });
    const other = await fetch(`${admin}/v1/items`, { headers: alice });
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ code: 'not_found' });
    expect((await fetch(`${admin}/metrics`, { method: 'POST' })).status).toBe(405);
    const absolute = await rawRequest(new URL(admin).port, 'GET http://[::1/metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(absolute).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('never serves /metrics on the public port, with or without credentials', async () => {
    const anonymous = await fetch(`${gw.base}/metrics`);
    expect(anonymous.status).toBe(401);
    const signedIn = await fetch(`${gw.base}/metrics`, { headers: alice });
    expect(signedIn.status).toBe(404);
    expect(await signedIn.text()).not.toContain('auth_gateway_');
  });

  it('exports the default process metrics under their standard names, the gateway\'s own under the prefix', async () => {
    const samples = await scrape();
    expect(sampleValue(samples, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(sampleValue(samples, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(sampleValue(samples, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sampleValue(samples, 'nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(sampleValue(samples, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    expect(samples.filter((s) => /^auth_gateway_(process|nodejs)_/.test(s.name))).toEqual([]);
    expect(sampleValue(samples, 'auth_gateway_store_up')).toBe(1);
    expect(sampleValue(samples, 'auth_gateway_bcrypt_queue_depth')).toBe(0);
  });
});

describe('request series', () => {
  it('counts by configured route, method, status class and auth method; never a raw path or a user name', async () => {
    const before = await scrape();
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    expect((await fetch(`${gw.base}/v1/items/alice-secret-id?size=10`, { headers: alice })).status).toBe(200);
    expect((await fetch(`${gw.base}/v1/items`, { headers: { authorization: `Bearer ${accessToken}` } })).status).toBe(200);
    expect((await fetch(`${gw.base}/v1/items`, { method: 'PROPFIND', headers: alice })).status).toBe(200);
    expect((await fetch(`${gw.base}/v1/items`)).status).toBe(401);
    expect((await fetch(`${gw.base}/unrouted/bob-private`, { headers: alice })).status).toBe(404);
    expect((await fetch(`${gw.base}/healthz`)).status).toBe(200);

    const samples = await scrape();
    const requests = (labels: Record<string, string>) =>
      (sampleValue(samples, 'auth_gateway_requests_total', labels) ?? 0) - (sampleValue(before, 'auth_gateway_requests_total', labels) ?? 0);
    expect(requests({ route: '/v1/items', method: 'GET', status_class: '2xx', auth: 'basic' })).toBe(1);
    expect(requests({ route: '/v1/items', method: 'GET', status_class: '2xx', auth: 'bearer' })).toBe(1);
    expect(requests({ route: '/v1/items', method: 'other', status_class: '2xx', auth: 'basic' })).toBe(1);
    expect(requests({ route: '/v1/items', method: 'GET', status_class: '4xx', auth: 'none' })).toBe(1);
    expect(requests({ route: 'none', method: 'GET', status_class: '4xx', auth: 'basic' })).toBe(1);
    expect(requests({ route: 'health', method: 'GET', status_class: '2xx', auth: 'none' })).toBe(1);
    expect(requests({ route: 'tokens', method: 'POST', status_class: '2xx', auth: 'none' })).toBe(1);
    expect(sampleValue(samples, 'auth_gateway_request_duration_seconds_count', { route: '/v1/items', method: 'GET' })).toBe(3);
    expect(sampleValue(samples, 'auth_gateway_request_duration_seconds_bucket', { route: '/v1/items', method: 'GET', le: '+Inf' })).toBe(3);

    const labelValues = samples.flatMap((s) => Object.values(s.labels));
    for (const leaked of ['alice', 'bob', 'alice-secret-id', '/unrouted/bob-private', 'PROPFIND']) {
      expect(labelValues.filter((v) => v.includes(leaked))).toEqual([]);
    }
  });

  it('counts token operations by outcome, and lockouts', async () => {
    const before = await scrape();
    const { refreshToken } = await createTokens(gw.base, 'bob', 'bob-pw');
    expect((await postJson(gw.base, '/v1/tokens/refresh', { refreshToken })).status).toBe(200);
    expect((await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: 'nope' })).status).toBe(401);
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: refreshToken, type: 'REFRESH_TOKEN' })).status).toBe(200);
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: 'x' })).status).toBe(400);
    for (const expected of [401, 401, 429]) {
      expect((await postJson(gw.base, '/v1/tokens/create', { appKey: 'bob', appSecret: 'wrong' })).status).toBe(expected);
    }
    expect((await fetch(`${gw.base}/v1/items`, { headers: { authorization: basic('bob', 'wrong') } })).status).toBe(429);

    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) => (sampleValue(after, name, labels) ?? 0) - (sampleValue(before, name, labels) ?? 0);
    const op = (operation: string, outcome: string) => delta('auth_gateway_token_operations_total', { operation, outcome });
    expect(op('create', 'ok')).toBe(1);
    expect(op('refresh', 'ok')).toBe(1);
    expect(op('refresh', 'invalid_refresh_token')).toBe(1);
    expect(op('revoke', 'ok')).toBe(1);
    expect(op('revoke', 'invalid_request')).toBe(1);
    expect(op('create', 'invalid_credentials')).toBe(2);
    expect(op('create', 'too_many_attempts')).toBe(1);
    expect(delta('auth_gateway_lockout_refusals_total', { endpoint: 'create' })).toBe(1);
    expect(delta('auth_gateway_lockout_refusals_total', { endpoint: 'basic' })).toBe(1);
    expect(delta('auth_gateway_store_command_duration_seconds_count', { command: 'createSession', result: 'ok' })).toBe(1);
    expect(delta('auth_gateway_store_command_duration_seconds_count', { command: 'rotateRefresh', result: 'ok' })).toBe(1);
  });

  it('counts rate-limit refusals by route and upstream errors by upstream and kind', async () => {
    expect((await fetch(`${gw.base}/v1/limited`, { headers: alice })).status).toBe(200);
    expect((await fetch(`${gw.base}/v1/limited`, { headers: alice })).status).toBe(429);
    expect((await fetch(`${gw.base}/v1/gone`, { headers: alice })).status).toBe(502);
    expect((await fetch(`${gw.base}/v1/slow`, { headers: alice })).status).toBe(504);
    // The upstream's own 503 is its answer, not an upstream error.
    gw.echo.handler = (_req, res) => res.writeHead(503).end();
    try {
      expect((await fetch(`${gw.base}/v1/items`, { headers: alice })).status).toBe(503);
    } finally {
      gw.echo.handler = (_req, res, r) => res.end(JSON.stringify(r));
    }

    const samples = await scrape();
    expect(sampleValue(samples, 'auth_gateway_rate_limited_total', { route: '/v1/limited' })).toBe(1);
    expect(sampleValue(samples, 'auth_gateway_upstream_errors_total', { upstream: 'gone', kind: 'refused' })).toBe(1);
    expect(sampleValue(samples, 'auth_gateway_upstream_errors_total', { upstream: 'slow', kind: 'timeout' })).toBe(1);
    // Every configured upstream has its series from the start: an upstream's own 503 is its answer, not an error.
    for (const kind of ['refused', 'reset', 'timeout']) expect(sampleValue(samples, 'auth_gateway_upstream_errors_total', { upstream: 'up', kind })).toBe(0);
    expect(sampleValue(samples, 'auth_gateway_requests_total', { route: '/v1/items', status_class: '5xx', auth: 'basic' })).toBe(1);
  });

  it('counts every problem answer by its code, each code from 0', async () => {
    const before = await scrape();
    expect(sampleValue(before, 'auth_gateway_refusals_total', { code: 'directory_unavailable' })).toBe(0);
    const missing = sampleValue(before, 'auth_gateway_refusals_total', { code: 'missing_credentials' })!;
    const res = await fetch(`${gw.base}/v1/items`);
    expect(await res.json()).toMatchObject({ code: 'missing_credentials' });
    expect(sampleValue(await scrape(), 'auth_gateway_refusals_total', { code: 'missing_credentials' })).toBe(missing + 1);
  });

  it('exports the requests waiting for a connection to an upstream', async () => {
    expect(sampleValue(await scrape(), 'auth_gateway_upstream_queued', { upstream: 'narrow' })).toBe(0);
    const aborts = [new AbortController(), new AbortController()];
    const pending = aborts.map((a) => fetch(`${gw.base}/v1/narrow`, { headers: alice, signal: a.signal }).catch(() => undefined));
    try {
      // One request has the only connection; the other waits for it.
      await expect.poll(async () => sampleValue(await scrape(), 'auth_gateway_upstream_queued', { upstream: 'narrow' }), { timeout: 5000 }).toBe(1);
    } finally {
      for (const a of aborts) a.abort();
      await Promise.all(pending);
    }
    await expect.poll(async () => sampleValue(await scrape(), 'auth_gateway_upstream_queued', { upstream: 'narrow' }), { timeout: 5000 }).toBe(0);
  });

  it('exports the open-tunnels gauge from a scrape, at 0 for every configured upstream before any tunnel (test/integration/websocket.test.ts follows real ones)', async () => {
    const text = await (await fetch(`${admin}/metrics`)).text();
    expect(text).toContain('# TYPE auth_gateway_websocket_tunnels gauge');
    expect(sampleValue(parsePrometheus(text), 'auth_gateway_websocket_tunnels', { upstream: 'up' })).toBe(0);
  });
});

describe('promtool', () => {
  it('`promtool check metrics` passes a real scrape taken after traffic (no gauge named like a counter)', async () => {
    const promtool = requireTool('promtool');
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    await fetch(`${gw.base}/v1/items?size=10`, { headers: { authorization: `Bearer ${accessToken}` } });
    await fetch(`${gw.base}/v1/items`, { headers: { authorization: basic('alice', 'alice-pw') } });
    await fetch(`${gw.base}/v1/gone`, { headers: { authorization: basic('alice', 'alice-pw') } });
    await fetch(`${gw.base}/v1/items`);
    const text = await (await fetch(`${admin}/metrics`)).text();
    expect(text).toContain('auth_gateway_request_duration_seconds_bucket');
    const checked = await run(promtool, ['check', 'metrics'], { input: text, timeoutMs: 10_000 });
    expect(`${checked.stdout}${checked.stderr}`).toBe('');
    expect(checked.code).toBe(0);
    // What the three removed gauges said is the sum of these.
    expect(text).toMatch(/^nodejs_active_handles\{type="[A-Za-z]+"\} \d+$/m);
  });
});

describe('store gauge on Redis', () => {
  const rgw = gatewayFixture({
    echo: false,
    redis: true,
    config: (f) => ({ store: { kind: 'redis', url: f.redis.url, commandTimeoutMs: 300 } }),
  });
  let radmin: string;
  beforeAll(async () => {
    radmin = `http://127.0.0.1:${await rgw.gateway.listenAdmin(0, '127.0.0.1')}`;
  });

  it('reads 1 while Redis answers and 0 while it is down, as /readyz on the admin port says', async () => {
    await expect.poll(async () => sampleValue(await scrape(radmin), 'auth_gateway_store_up'), { timeout: 5000 }).toBe(1);
    await rgw.redis.stop();
    expect(sampleValue(await scrape(radmin), 'auth_gateway_store_up')).toBe(0);
    expect((await fetch(`${radmin}/readyz`)).status).toBe(503);
    expect((await fetch(`${radmin}/healthz`)).status).toBe(200);
  });
});

describe('admin: false', () => {
  it('has no admin listener', async () => {
    const off = await startGateway(testConfig(gw.users.file, { admin: false }));
    try {
      expect(off.gateway.admin).toBeUndefined();
      await expect(off.gateway.listenAdmin(0)).rejects.toThrow(/admin: false/);
    } finally {
      await off.close();
    }
  });
});
