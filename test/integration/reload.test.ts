import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { basic, createTokens, gatewayFixture, htpasswd, SECRET, startGateway } from '../support/fixtures.js';
import { closedPort, loggedPort, startNode, waitForHttp, type Child } from '../support/process.js';

// Reload without restart: the built gateway as operators run it, SIGHUP under load with requests in
// flight, a broken file kept out, --watch; and in-process, what a reload changes (users, keys, limits).

const CLI = join(import.meta.dirname, '../../dist/src/main.js');
const ALICE = basic('alice', 'alice-pw');

const f = gatewayFixture({
  users: { alice: 'alice-pw', bob: 'bob-pw' },
  gateway: false,
  before: ({ echo }) => {
    // /slow answers after 800 ms: a request in flight across the reload.
    echo.handler = (req, res, r) => {
      const answer = () => res.end(JSON.stringify(r));
      if (req.url!.includes('/slow')) setTimeout(answer, 800);
      else answer();
    };
  },
});

/** Port 0: the gateway takes any free port and its `auth-gateway listening` line says which (`loggedPort`). */
function yaml(routes: string[], extra = ''): string {
  return [
    'server: { host: 127.0.0.1, port: 0 }',
    `users: { htpasswd: ${f.users.file} }`,
    `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
    `upstreams: { up: { url: "${f.echo.url}" } }`,
    `routes:`,
    ...routes.map((p) => `  - { path: ${p}, upstream: up }`),
    'admin: false',
    extra,
  ].join('\n');
}

function get(port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { authorization: ALICE } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', () => resolve(-1));
    req.end();
  });
}

const logLines = (child: Child) => child.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

describe('SIGHUP and --watch on the running gateway', () => {
  it('SIGHUP under load: a request in flight finishes on the old configuration, new routes serve at once, no request fails', async () => {
    const file = join(f.users.dir, 'sighup.yaml');
    writeFileSync(file, yaml(['/v1/a', '/v1/both']));
    const child = startNode(CLI, ['serve', '--config', file], { GATEWAY_JWT_SECRET: SECRET });
    try {
      const port = await loggedPort(child);
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, child);
      let running = true;
      const statuses: number[] = [];
      const load = Array.from({ length: 4 }, async () => {
        while (running) statuses.push(await get(port, '/v1/both/x'));
      });
      const inFlight = get(port, '/v1/a/slow');
      await new Promise((r) => setTimeout(r, 200));
      writeFileSync(file, yaml(['/v1/b', '/v1/both']));
      child.proc.kill('SIGHUP');
      await expect.poll(() => logLines(child).some((l) => l.msg === 'configuration reloaded'), { timeout: 3000 }).toBe(true);
      expect(await get(port, '/v1/b/new')).toBe(200);
      expect(await get(port, '/v1/a/gone')).toBe(404);
      // Started before the reload on a route the new configuration no longer has: still answered.
      expect(await inFlight).toBe(200);
      await new Promise((r) => setTimeout(r, 300));
      running = false;
      await Promise.all(load);
      expect(statuses.length).toBeGreaterThan(20);
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      expect(child.proc.exitCode).toBeNull();
    } finally {
      await child.stop();
    }
  });

  it('SIGHUP during start-up (the store not reachable yet) reloads instead of killing the process', async () => {
    const file = join(f.users.dir, 'startup.yaml');
    // Start-up waits for the store up to its connect timeout before it listens: 3 s here, so the SIGHUP
    // surely lands inside the wait however loaded the machine is.
    writeFileSync(file, yaml(['/v1/a'], 'store: { connectTimeoutMs: 3000 }'));
    const closed = await closedPort();
    const child = startNode(CLI, ['serve', '--config', file], { GATEWAY_JWT_SECRET: SECRET, REDIS_URL: `redis://127.0.0.1:${closed}` });
    try {
      // The store's first refusal is logged at once: the process is now in its start-up wait, not listening yet.
      await expect.poll(() => logLines(child).some((l) => String(l.msg).startsWith('redis unavailable')), { timeout: 10_000 }).toBe(true);
      expect(logLines(child).some((l) => l.msg === 'auth-gateway listening')).toBe(false);
      child.proc.kill('SIGHUP');
      await expect.poll(() => logLines(child).some((l) => l.msg === 'configuration reloaded'), { timeout: 3000 }).toBe(true);
      expect(child.proc.exitCode).toBeNull();
      expect(child.proc.signalCode).toBeNull();
      const port = await loggedPort(child);
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, child, 10_000);
    } finally {
      await child.stop();
    }
  });

  it('a broken file on SIGHUP is logged with every problem and the configuration in force stays', async () => {
    const file = join(f.users.dir, 'broken.yaml');
    writeFileSync(file, yaml(['/v1/a']));
    const child = startNode(CLI, ['serve', '--config', file], { GATEWAY_JWT_SECRET: SECRET });
    try {
      const port = await loggedPort(child);
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, child);
      writeFileSync(file, yaml(['/v1/a'], 'lockout: { windowSeconds: -1 }\nrateLimit: { requests: 0 }'));
      child.proc.kill('SIGHUP');
      await expect.poll(() => logLines(child).find((l) => l.msg === 'configuration not reloaded; the one in force stays'), { timeout: 3000 }).toMatchObject({
        level: 'error', why: 'SIGHUP', problems: ['lockout.windowSeconds (line 8, column 12) must be a positive integer; found -1', 'rateLimit.requests (line 9, column 14) must be a positive integer; found 0'],
      });
      expect(await get(port, '/v1/a/x')).toBe(200);
      expect(child.proc.exitCode).toBeNull();
    } finally {
      await child.stop();
    }
  });

  it('--watch reloads when the file changes, and names settings that need a restart', async () => {
    const file = join(f.users.dir, 'watched.yaml');
    writeFileSync(file, yaml(['/v1/a']));
    const child = startNode(CLI, ['serve', '--config', file, '--watch'], { GATEWAY_JWT_SECRET: SECRET });
    try {
      const port = await loggedPort(child);
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, child);
      expect(await get(port, '/v1/c/x')).toBe(404);
      writeFileSync(file, yaml(['/v1/a', '/v1/c'], 'log: { level: debug }'));
      await expect.poll(() => get(port, '/v1/c/x'), { timeout: 3000 }).toBe(200);
      // Logged with the reload; the process writes its lines to stdout in batches of up to 20 ms.
      await expect.poll(() => logLines(child).find((l) => l.msg === 'these settings changed but take effect only after a restart'), { timeout: 3000 }).toMatchObject({ settings: ['log.level'] });
    } finally {
      await child.stop();
    }
  });
});

describe('what a reload changes', () => {
  const base = (extra: string) => parseConfig([
    'server: { host: 127.0.0.1, port: 0 }',
    `users: { htpasswd: ${f.users.file}, watch: false }`,
    `upstreams: { up: { url: "${f.echo.url}" } }`,
    'routes: [{ path: /v1/a, upstream: up }]',
    'admin: false',
    'log: { level: silent, access: false }',
    extra,
  ].join('\n'), join(f.users.dir, 'inline.yaml'), {});

  it('keys: a new signing key signs new tokens; the old one, moved to verificationKeys, keeps verifying; dropped, it does not', async () => {
    const other = 'another-secret-another-secret-0123456789abcd';
    // refreshSecret, as the docs ask before a rotation: the sessions (and the uv claim) do not hang on the signing key.
    const refresh = 'refreshSecret: "refresh-secret-refresh-secret-0123456789"';
    const gw = await startGateway(base(`tokens: { signing: { alg: HS256, secret: "${SECRET}" }, ${refresh} }`));
    try {
      const old = await createTokens(gw.base, 'alice', 'alice-pw');
      gw.gateway.reload(base(`tokens: { signing: { alg: HS256, secret: "${other}" }, verificationKeys: [{ alg: HS256, secret: "${SECRET}" }], ${refresh} }`));
      const fresh = await createTokens(gw.base, 'alice', 'alice-pw');
      expect(fresh.accessToken.split('.')[0]).not.toBe(old.accessToken.split('.')[0]);
      for (const t of [old, fresh]) expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: `Bearer ${t.accessToken}` } })).status).toBe(200);
      gw.gateway.reload(base(`tokens: { signing: { alg: HS256, secret: "${other}" }, ${refresh} }`));
      expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: `Bearer ${old.accessToken}` } })).status).toBe(401);
      expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: `Bearer ${fresh.accessToken}` } })).status).toBe(200);
    } finally {
      await gw.close();
    }
  });

  it('upstream pools: a reload that changes only maxTunnels keeps the keep-alive connections; one that changes maxConnections opens new ones', async () => {
    let connections = 0;
    const counting = createServer((_req, res) => res.end('ok'));
    counting.on('connection', () => connections++);
    await new Promise<void>((resolve) => counting.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(counting.address() as AddressInfo).port}`;
    const withUpstream = (limits: { maxTunnels: number; maxConnections?: number }) => {
      const c = base(`tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`);
      c.upstreams.up = { ...c.upstreams.up!, url, targets: [url], ...limits };
      return c;
    };
    const gw = await startGateway(withUpstream({ maxTunnels: 10 }));
    const get = async () => expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: ALICE } })).status).toBe(200);
    try {
      await get();
      expect(connections).toBe(1);
      gw.gateway.reload(withUpstream({ maxTunnels: 20 }));
      await get();
      expect(connections).toBe(1);
      gw.gateway.reload(withUpstream({ maxTunnels: 20, maxConnections: 8 }));
      await get();
      expect(connections).toBe(2);
    } finally {
      await gw.close();
      counting.closeAllConnections();
      await new Promise((resolve) => counting.close(resolve));
    }
  });

  it('limits and users: a rate limit and another users file take effect; a configuration that cannot be served is refused whole', async () => {
    const others = htpasswd({ carol: 'carol-pw' });
    const gw = await startGateway(base(`tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`));
    try {
      gw.gateway.reload(base(`tokens: { signing: { alg: HS256, secret: "${SECRET}" } }\nrateLimit: { requests: 1, windowSeconds: 60 }`));
      expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: ALICE } })).status).toBe(200);
      expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: ALICE } })).status).toBe(429);
      const withCarol = base(`tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`);
      withCarol.users.htpasswd = others.file;
      gw.gateway.reload(withCarol);
      expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: basic('carol', 'carol-pw') } })).status).toBe(200);
      expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: ALICE } })).status).toBe(401);
      const broken = base(`tokens: { signing: { alg: RS256, privateKeyFile: ${join(f.users.dir, 'missing.pem')} } }`);
      expect(() => gw.gateway.reload(broken)).toThrow(/key file not found/);
      expect((await fetch(`${gw.base}/v1/a/x`, { headers: { authorization: basic('carol', 'carol-pw') } })).status).toBe(200);
    } finally {
      await gw.close();
      others.remove();
    }
  });
});
