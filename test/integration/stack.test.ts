import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { loggedPort, startNode, waitForHttp, type Child } from '../support/process.js';

/**
 * docker-compose.yml's wiring, run as plain processes (no Docker engine here): redis-server with an
 * append-only file, the example list service, and the gateway (built CLI, shipped config) given the
 * environment the compose file gives it, with service host names mapped to loopback ports.
 */
const ROOT = join(import.meta.dirname, '../..');
const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, { build?: unknown; image?: string; environment?: Record<string, string>; command?: string[]; volumes?: string[]; ports?: string[] }>;
};

let redis: TestRedis;
let list: Child;
let gateway: Child;
let base: string;
let admin: string;

beforeAll(async () => {
  redis = await startRedis({ appendOnly: true });
  const listCommand = compose.services['list-service']!.command!;
  expect(listCommand.slice(0, 2)).toEqual(['node', 'dist/examples/list-service/main.js']);
  // Port 0, each of them: the port each got is read back from its "listening" log line.
  list = startNode(join(ROOT, listCommand[1]!), [], { PORT: '0', HOST: '127.0.0.1' });
  const listPort = await loggedPort(list, 'listening');
  await waitForHttp(`http://127.0.0.1:${listPort}/healthz`, list);

  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(compose.services.gateway!.environment!)) {
    env[name] = value
      .replace('redis://redis:6379', redis.url)
      .replace('http://list-service:9001', `http://127.0.0.1:${listPort}`)
      .replace(/^\$\{GATEWAY_JWT_SECRET:\?.*\}$/, 'stack-test-secret-stack-test-secret-0123')
      // The container's admin listener on all its interfaces is this test's loopback.
      .replace(/^0\.0\.0\.0$/, '127.0.0.1');
  }
  expect(Object.keys(env).sort()).toEqual(['ADMIN_HOST', 'CONTACTS_URL', 'CONVERSATIONS_URL', 'GATEWAY_JWT_SECRET', 'REDIS_URL']);
  // The users file mounted is the operator's (GATEWAY_USERS_FILE); this test plays the demo, with config/users.htpasswd.
  gateway = startNode(join(ROOT, 'dist/src/main.js'), ['serve', '--config', join(ROOT, 'config/gateway.yaml')], { ...env, PORT: '0', ADMIN_PORT: '0' });
  const gwPort = await loggedPort(gateway);
  const adminPort = await loggedPort(gateway, 'admin listening');
  base = `http://127.0.0.1:${gwPort}`;
  admin = `http://127.0.0.1:${adminPort}`;
  await waitForHttp(`${base}/readyz`, gateway);
});

afterAll(async () => {
  await gateway?.stop('SIGKILL');
  await list?.stop();
  await redis?.destroy();
});

describe('docker-compose.yml', () => {
  it('builds the image once and runs it for both services', () => {
    const built = Object.entries(compose.services).filter(([, s]) => s.build !== undefined).map(([name]) => name);
    expect(built).toEqual(['list-service']);
    expect(compose.services.gateway!.image).toBe(compose.services['list-service']!.image);
    expect(compose.services.gateway!.image).toMatch(/^auth-gateway:/);
  });

  it('ships no demo users (the operator names the users file), and the admin port is published on loopback only', () => {
    const volumes = compose.services.gateway!.volumes!;
    expect(volumes).not.toContain('./config:/app/config:ro');
    expect(volumes.find((v) => v.endsWith(':/app/config/users.htpasswd:ro'))).toMatch(/^\$\{GATEWAY_USERS_FILE:\?/);
    expect(compose.services.gateway!.ports).toEqual(['8080:8080', '127.0.0.1:9091:9091']);
  });
});

describe('the compose stack as processes', () => {
  let tokens: { accessToken: string; refreshToken: string };

  it('creates tokens for the demo user and serves a page envelope from the list service', async () => {
    const res = await fetch(`${base}/v1/tokens/create`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ appKey: 'demo', appSecret: 'demo-password' }),
    });
    expect(res.status).toBe(200);
    tokens = (await res.json()) as typeof tokens;
    const page = await fetch(`${base}/v1/conversations?page=1&size=10&sort=campaignId,DESC`, { headers: { authorization: `Bearer ${tokens.accessToken}` } });
    expect(page.status).toBe(200);
    const body = (await page.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      pageable: { pageNumber: 1, pageSize: 10, offset: 10 },
      totalElements: 1000, totalPages: 100, numberOfElements: 10, first: false, last: false,
    });
    const ids = (body.content as Array<{ campaignId: string }>).map((c) => c.campaignId);
    expect([...ids].sort().reverse()).toEqual(ids);
    const basicAuth = `Basic ${Buffer.from('demo:demo-password').toString('base64')}`;
    expect((await fetch(`${base}/v1/contacts/phoneNumber?size=10`, { headers: { authorization: basicAuth } })).status).toBe(200);
  });

  it('serves Prometheus metrics on the admin port, and not on the public one', async () => {
    const metrics = await fetch(`${admin}/metrics`);
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(text).toMatch(/^auth_gateway_requests_total\{route="\/v1\/conversations",method="GET",status_class="2xx",auth="bearer",protocol="http\/1\.1"\} 1$/m);
    expect(text).toMatch(/^auth_gateway_store_up 1$/m);
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
  });

  it('keeps tokens across a Redis restart (append-only file)', async () => {
    await redis.stop();
    await redis.start();
    await waitForHttp(`${base}/readyz`, gateway, 5000);
    const res = await fetch(`${base}/v1/contacts?size=10`, { headers: { authorization: `Bearer ${tokens.accessToken}` } });
    expect(res.status).toBe(200);
    const refreshed = await fetch(`${base}/v1/tokens/refresh`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ refreshToken: tokens.refreshToken }),
    });
    expect(refreshed.status).toBe(200);
  });

  it('shuts down gracefully on SIGTERM with exit code 0', async () => {
    expect(await gateway.stop('SIGTERM')).toBe(0);
    expect(gateway.output()).toContain('"msg":"stopped"');
  });
});
