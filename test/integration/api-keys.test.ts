import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/log.js';
import type { RedisTable } from '../../src/stores/tables/shared-table-redis.js';
import { basic, gatewayFixture, SECRET, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';
import { waitForHttp } from '../support/process.js';

/**
 * API keys end to end: two gateway instances sharing one real Redis, keys managed with the built CLI (a
 * process of its own), requests through both instances to a real upstream.
 */

const CLI = join(import.meta.dirname, '../../dist/src/main.js');
const f = gatewayFixture({ redis: true, gateway: false });
let gateways: RunningGateway[] = [];
const logs: string[] = [];
let configFile: string;

function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string; endedAt: number }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args, '--config', configFile], { env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr, endedAt: performance.now() }));
  });
}

async function createKey(...args: string[]): Promise<{ key: string; id: string }> {
  const r = await cli(['keys', 'create', ...args]);
  expect(r.status, r.stderr).toBe(0);
  const key = r.stdout.trim();
  expect(key).toMatch(/^agk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
  return { key, id: key.split('_')[1]! };
}

async function get(gw: RunningGateway, path: string, headers: Record<string, string>, method = 'GET'): Promise<Response> {
  const res = await fetch(`${gw.base}${path}`, { method, headers });
  await res.arrayBuffer();
  return res;
}

const table = (gw: RunningGateway) => gw.gateway.apiKeys!.table as RedisTable<unknown>;

beforeAll(async () => {
  const store = { kind: 'redis', url: f.redis.url, keyPrefix: 'ak:', livenessCacheMs: 10_000, commandTimeoutMs: 2000 };
  const config = () => testConfig(f.users.file, {
    store,
    apiKeys: {},
    upstreams: { up: { url: f.echo.url } },
    routes: [
      { path: '/v1/reports', upstream: 'up', forwardAuthorization: true },
      { path: '/v1/contacts', upstream: 'up' },
    ],
    log: { level: 'debug', access: true },
  });
  const log = () => createLogger('debug', (line) => logs.push(line));
  gateways = await Promise.all([startGateway(config(), { log: log() }), startGateway(config(), { log: log() })]);
  for (const gw of gateways) await waitForHttp(`${gw.base}/readyz`);
  // Both change channels subscribed: a key read once is then answered from memory.
  for (const started = Date.now(); !gateways.every((gw) => table(gw).cache.enabled); await new Promise((r) => setTimeout(r, 20))) {
    if (Date.now() - started > 15_000) throw new Error('the key caches did not turn on');
  }
  configFile = join(f.users.dir, 'gateway.yaml');
  writeFileSync(configFile, [
    `store: { kind: redis, url: "${f.redis.url}", keyPrefix: "ak:", commandTimeoutMs: 2000 }`,
    'apiKeys: {}',
    `users: { htpasswd: ${f.users.file} }`,
    `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
    'admin: false',
  ].join('\n'));
}, 30_000);
afterAll(async () => {
  await Promise.all(gateways.map((gw) => gw.close()));
});

describe('API keys on two instances sharing one Redis', () => {
  it('a key made by the CLI works on both, from X-API-Key or as a bearer credential, and never reaches the upstream', async () => {
    const { key, id } = await createKey('--name', 'ci-bot', '--groups', 'reports,ci');
    const secret = key.split('_').slice(2).join('_');
    for (const gw of gateways) {
      f.echo.received.length = 0;
      const viaHeader = await get(gw, '/v1/reports/daily', { 'x-api-key': key, 'X_API_KEY': key });
      expect(viaHeader.status).toBe(200);
      // A route that forwards Authorization still never forwards a key in it.
      const viaBearer = await get(gw, '/v1/reports/daily', { authorization: `Bearer ${key}` });
      expect(viaBearer.status).toBe(200);
      expect(f.echo.received).toHaveLength(2);
      for (const r of f.echo.received) {
        expect(r.headers['x-authenticated-user']).toBe('ci-bot');
        expect(r.headers['x-authenticated-via']).toBe('api_key');
        expect(r.headers['x-authenticated-groups']).toBe('reports,ci');
        expect(r.headers['x-api-key']).toBeUndefined();
        expect(r.headers.authorization).toBeUndefined();
        expect(JSON.stringify(r.rawHeaders)).not.toContain(secret);
      }
    }
    // The key is now answered from memory on both instances.
    expect(gateways.map((gw) => gw.gateway.apiKeys!.lookupNow(id)?.id)).toEqual([id, id]);
    // No log line holds the secret; the access lines name the key's id and name.
    const joined = logs.join('\n');
    expect(joined).not.toContain(secret);
    const access = logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request' && l.keyId === id);
    expect(access.length).toBeGreaterThanOrEqual(4);
    expect(access[0]).toMatchObject({ via: 'api_key', user: 'ci-bot', keyName: 'ci-bot', status: 200 });
    // keys list shows it, without a secret or hash.
    const list = await cli(['keys', 'list']);
    expect(list.status).toBe(0);
    expect(list.stdout).toContain(id);
    expect(list.stdout).toContain('ci-bot');
    expect(list.stdout).not.toContain(secret);
  });

  it('a key beside any Authorization header is refused (400 invalid_request), Basic as Bearer; nothing reaches the upstream', async () => {
    const { key } = await createKey('--name', 'beside-bot');
    const [gw] = gateways as [RunningGateway];
    // Both credentials valid on their own: neither may win silently.
    expect((await get(gw, '/v1/contacts', { authorization: basic('alice', 'alice-pw') })).status).toBe(200);
    f.echo.received.length = 0;
    for (const authorization of [basic('alice', 'alice-pw'), basic('alice', 'wrong'), 'Bearer eyJhbGciOiJIUzI1NiJ9.e30.x', `Bearer ${key}`]) {
      const res = await fetch(`${gw.base}/v1/reports`, { headers: { 'x-api-key': key, authorization } });
      expect(res.status, authorization).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe('invalid_request');
    }
    expect(f.echo.received).toHaveLength(0);
  });

  it('a malformed, unknown or wrong key is 401; a bearer token of another form is left to the token check', async () => {
    const { key } = await createKey('--name', 'other');
    const [gw] = gateways as [RunningGateway];
    const wrongSecret = `${key.slice(0, -4)}AAAA`;
    for (const value of ['agk_nope', `${key} `.repeat(2), wrongSecret, `agk_0123456789abcdef_${'A'.repeat(43)}`]) {
      const res = await fetch(`${gw.base}/v1/reports`, { headers: { 'x-api-key': value } });
      expect(res.status, value).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('invalid_credentials');
    }
    const token = await fetch(`${gw.base}/v1/reports`, { headers: { authorization: 'Bearer eyJhbGciOiJIUzI1NiJ9.e30.x' } });
    expect(token.status).toBe(401);
    expect(((await token.json()) as { code: string }).code).toBe('invalid_token');
  });

  it('keys revoke answers once neither instance accepts the key: none accepted after the answer under keep-alive load', async () => {
    const { key, id } = await createKey('--name', 'revoked-bot');
    const samples: Array<{ sentAt: number; status: number }> = [];
    let polling = true;
    const poll = async (gw: RunningGateway) => {
      while (polling) {
        const sentAt = performance.now();
        const res = await fetch(`${gw.base}/v1/contacts`, { headers: { 'x-api-key': key } });
        await res.arrayBuffer();
        samples.push({ sentAt, status: res.status });
      }
    };
    const pollers = gateways.flatMap((gw) => [poll(gw), poll(gw)]);
    // Until both instances answer the key from memory.
    for (const started = Date.now(); !gateways.every((gw) => gw.gateway.apiKeys!.lookupNow(id)); await new Promise((r) => setTimeout(r, 5))) {
      if (Date.now() - started > 5000) throw new Error('the key was not cached on both instances');
    }
    const revoked = await cli(['keys', 'revoke', id]);
    expect(revoked.status, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain(`revoked key ${id}`);
    const answeredAt = revoked.endedAt;
    const after = () => samples.filter((s) => s.sentAt > answeredAt);
    for (const started = performance.now(); after().length < 20 && performance.now() - started < 5000;) await new Promise((r) => setTimeout(r, 10));
    polling = false;
    await Promise.all(pollers);
    expect(samples.filter((s) => s.sentAt < answeredAt - 500 && s.status === 200).length).toBeGreaterThan(0);
    expect(after().length).toBeGreaterThan(0);
    expect(after().filter((s) => s.status !== 401)).toEqual([]);
    // Revoking it again: there is no such key.
    const again = await cli(['keys', 'revoke', id]);
    expect(again.status).toBe(2);
    expect(again.stderr).toContain(`there is no key ${id}`);
  }, 30_000);

  it('keys create refuses a scope that could never match (exit 2, naming it)', async () => {
    for (const [args, named] of [[['--methods', 'GET,FETCH'], 'FETCH'], [['--routes', '/v1/reports/../contacts'], '/v1/reports/../contacts']] as const) {
      const r = await cli(['keys', 'create', '--name', 'never', ...args]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toContain(`"${named}"`);
      expect(r.stdout).toBe('');
    }
  });

  it('a rotated key: the new one works at once, the old one until the overlap ends and not after', async () => {
    const { key: oldKey, id } = await createKey('--name', 'rotating', '--expires-in', '90d');
    for (const gw of gateways) expect((await get(gw, '/v1/contacts', { 'x-api-key': oldKey })).status).toBe(200);
    const rotated = await cli(['keys', 'rotate', id, '--overlap', '2s']);
    const rotatedAt = Date.now();
    expect(rotated.status, rotated.stderr).toBe(0);
    const newKey = rotated.stdout.trim();
    expect(newKey).not.toBe(oldKey);
    expect(rotated.stderr).toContain('works until');
    for (const gw of gateways) {
      expect((await get(gw, '/v1/contacts', { 'x-api-key': newKey })).status).toBe(200);
      // Within the overlap (2 s from the rotation): the old one still works.
      if (Date.now() < rotatedAt + 1500) expect((await get(gw, '/v1/contacts', { 'x-api-key': oldKey })).status).toBe(200);
    }
    await new Promise((r) => setTimeout(r, Math.max(0, rotatedAt + 2100 - Date.now())));
    for (const gw of gateways) {
      expect((await get(gw, '/v1/contacts', { 'x-api-key': oldKey })).status).toBe(401);
      expect((await get(gw, '/v1/contacts', { 'x-api-key': newKey })).status).toBe(200);
    }
    const list = await cli(['keys', 'list']);
    expect(list.stdout).toMatch(new RegExp(`${id}.*rotating.*\\(expired\\)`));
  }, 20_000);

  it('outside its routes or methods: 403; its own rate limit, shared by both instances: 429 with Retry-After', async () => {
    const { key } = await createKey('--name', 'scoped', '--routes', '/v1/reports', '--methods', 'GET,HEAD', '--rate', '3/60s');
    const [a, b] = gateways as [RunningGateway, RunningGateway];
    expect((await get(a, '/v1/reports/2026', { 'x-api-key': key })).status).toBe(200);
    const outside = await fetch(`${b.base}/v1/contacts`, { headers: { 'x-api-key': key } });
    expect(outside.status).toBe(403);
    expect(((await outside.json()) as { code: string }).code).toBe('forbidden');
    const post = await fetch(`${a.base}/v1/reports`, { method: 'POST', headers: { 'x-api-key': key } });
    expect(post.status).toBe(403);
    await post.arrayBuffer();
    // The two refused requests took nothing from the bucket (refused before the rate limit): two left.
    expect((await get(b, '/v1/reports', { 'x-api-key': key })).status).toBe(200);
    expect((await get(a, '/v1/reports', { 'x-api-key': key })).status).toBe(200);
    const limited = await fetch(`${b.base}/v1/reports`, { headers: { 'x-api-key': key } });
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { code: string }).code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another key is not limited by this one's bucket.
    const { key: other } = await createKey('--name', 'scoped-2');
    expect((await get(b, '/v1/reports', { 'x-api-key': other })).status).toBe(200);
  });

  it('an unknown key and a revoked key are refused with the same timing', async () => {
    const [gw] = gateways as [RunningGateway];
    const revokedKeys: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { key, id } = await createKey('--name', `timing-${i}`);
      expect((await get(gw, '/v1/contacts', { 'x-api-key': key })).status).toBe(200);
      expect(await gw.gateway.apiKeys!.revoke(id)).not.toBeNull();
      revokedKeys.push(key);
    }
    const unknown = (i: number) => `agk_${(0xabc000 + i).toString(16).padStart(16, '0')}_${'B'.repeat(43)}`;
    const times: Record<'unknown' | 'revoked', number[]> = { unknown: [], revoked: [] };
    const agent = async (kind: 'unknown' | 'revoked', key: string) => {
      const started = performance.now();
      const res = await get(gw, '/v1/contacts', { 'x-api-key': key });
      times[kind].push(performance.now() - started);
      expect(res.status).toBe(401);
    };
    // Warm up, then interleave the two kinds so load on the machine hits both alike.
    for (let i = 0; i < 20; i++) await agent(i % 2 ? 'unknown' : 'revoked', i % 2 ? unknown(i) : revokedKeys[i % 3]!);
    times.unknown.length = 0;
    times.revoked.length = 0;
    for (let i = 0; i < 200; i++) {
      await agent('unknown', unknown(i));
      await agent('revoked', revokedKeys[i % 3]!);
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
    const [mu, mr] = [median(times.unknown), median(times.revoked)];
    // Both take the same steps (one store read, a constant-time compare): within noise of each other.
    expect(Math.abs(mu - mr), `median unknown ${mu.toFixed(3)} ms, revoked ${mr.toFixed(3)} ms`).toBeLessThan(Math.max(0.5, 0.25 * Math.max(mu, mr)));
  }, 30_000);

  it('a wrong secret of a key held in memory takes the same steps as an unknown id: a store read, two judgements', async () => {
    const [gw] = gateways as [RunningGateway];
    const keys = gw.gateway.apiKeys!;
    const { key, id } = await createKey('--name', 'steps');
    expect((await get(gw, '/v1/contacts', { 'x-api-key': key })).status).toBe(200);
    expect(keys.lookupNow(id)).toBeTruthy();
    const steps: string[] = [];
    const spies = (['lookupNow', 'lookup', 'judge'] as const).map((name) => {
      const original = keys[name].bind(keys) as (...args: never[]) => unknown;
      return vi.spyOn(keys, name).mockImplementation(((...args: never[]) => {
        steps.push(name);
        return original(...args);
      }) as never);
    });
    const stepsOf = async (presented: string) => {
      steps.length = 0;
      const res = await get(gw, '/v1/contacts', { 'x-api-key': presented });
      expect(res.status, presented).toBe(401);
      return [...steps];
    };
    try {
      const wrongSecret = await stepsOf(`${key.slice(0, -4)}${key.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`);
      const unknownId = await stepsOf(`agk_${'0'.repeat(15)}1_${key.slice(-43)}`);
      expect(wrongSecret).toEqual(['lookupNow', 'judge', 'lookup', 'judge']);
      expect(unknownId).toEqual(wrongSecret);
      // The key itself is still answered from memory: no store read.
      steps.length = 0;
      expect((await get(gw, '/v1/contacts', { 'x-api-key': key })).status).toBe(200);
      expect(steps).toEqual(['lookupNow', 'judge']);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });

  it('while an instance\'s change channel is down it trusts no memory: every key is asked of the store, a revocation still holds', async () => {
    const [a, b] = gateways as [RunningGateway, RunningGateway];
    const { key, id } = await createKey('--name', 'channel-cut');
    expect((await get(a, '/v1/contacts', { 'x-api-key': key })).status).toBe(200);
    expect(a.gateway.apiKeys!.lookupNow(id)).toBeTruthy();
    // Cut a's listener (it reconnects by itself): the memory is dropped as soon as the cut is seen.
    for (const c of table(a).channel.connections) c.disconnect(true);
    for (const started = Date.now(); a.gateway.apiKeys!.lookupNow(id) !== undefined; await new Promise((r) => setTimeout(r, 5))) {
      if (Date.now() - started > 2000) throw new Error('the cut listener left the key in memory');
    }
    // While it is away the key is asked of the store (with it back, read again and kept).
    expect((await get(a, '/v1/contacts', { 'x-api-key': key })).status).toBe(200);
    expect(await b.gateway.apiKeys!.revoke(id)).not.toBeNull();
    expect((await get(a, '/v1/contacts', { 'x-api-key': key })).status).toBe(401);
    // The listener comes back (reconnects by itself): memory on again.
    for (const started = Date.now(); !table(a).cache.enabled; await new Promise((r) => setTimeout(r, 20))) {
      if (Date.now() - started > 10_000) throw new Error('the change channel did not come back');
    }
  }, 20_000);
});
