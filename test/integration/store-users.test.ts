import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createTokens, gatewayFixture, SECRET, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';
import { waitForHttp } from '../support/process.js';
import { createLogger } from '../../src/log.js';
import type { RedisTable } from '../../src/stores/tables/shared-table-redis.js';

/**
 * Users kept in the store: two gateway instances sharing one real Redis, the users managed with the
 * built CLI (a process of its own, the password on stdin), no reload anywhere.
 */

const CLI = join(import.meta.dirname, '../../dist/src/main.js');
const f = gatewayFixture({ redis: true, gateway: false, users: { alice: 'alice-pw' } });
let gateways: RunningGateway[] = [];
let configFile: string;

function cli(args: string[], stdin = ''): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args, '--config', configFile], { env: { PATH: process.env.PATH }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

const status = async (gw: RunningGateway, authorization: string) => {
  const res = await fetch(`${gw.base}/v1/x`, { headers: { authorization } });
  await res.arrayBuffer();
  return res.status;
};

/** Polls until every instance answers `expected`, at most `withinMs`; answers how long it took. */
async function untilAll(authorization: string, expected: number, withinMs: number): Promise<number> {
  const started = performance.now();
  for (;;) {
    const statuses = await Promise.all(gateways.map((gw) => status(gw, authorization)));
    if (statuses.every((s) => s === expected)) return performance.now() - started;
    if (performance.now() - started > withinMs) throw new Error(`after ${withinMs} ms the instances answer ${statuses.join(', ')}, not ${expected}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

beforeAll(async () => {
  const config = () => testConfig(f.users.file, {
    store: { kind: 'redis', url: f.redis.url, keyPrefix: 'su:', commandTimeoutMs: 2000 },
    users: { htpasswd: f.users.file, watch: false, store: true },
    upstreams: { up: { url: f.echo.url } },
    routes: [{ path: '/v1/x', upstream: 'up' }, { path: '/v1/admin', upstream: 'up', allow: { groups: ['ops'] } }],
  });
  gateways = await Promise.all([startGateway(config()), startGateway(config())]);
  for (const gw of gateways) await waitForHttp(`${gw.base}/readyz`);
  configFile = join(f.users.dir, 'gateway.yaml');
  writeFileSync(configFile, [
    `store: { kind: redis, url: "${f.redis.url}", keyPrefix: "su:", commandTimeoutMs: 2000 }`,
    `users: { htpasswd: ${f.users.file}, store: true }`,
    `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
    'admin: false',
  ].join('\n'));
}, 30_000);
afterAll(async () => {
  await Promise.all(gateways.map((gw) => gw.close()));
});

describe('users kept in the store, on two instances', () => {
  it('users add on the CLI: Basic works on both within a second, no reload; groups count in allow rules', async () => {
    const added = await cli(['users', 'add', 'carol', '--groups', 'ops', '--cost', '4'], 'carol-password\n');
    expect(added.status, added.stderr).toBe(0);
    expect(added.stdout).toContain('added user "carol"');
    expect(await untilAll(basic('carol', 'carol-password'), 200, 1000)).toBeLessThan(1000);
    for (const gw of gateways) {
      expect(await status(gw, basic('carol', 'wrong-password'))).toBe(401);
      const admin = await fetch(`${gw.base}/v1/admin`, { headers: { authorization: basic('carol', 'carol-password') } });
      expect(admin.status).toBe(200);
      await admin.arrayBuffer();
    }
    // The file's users keep working beside the store's.
    for (const gw of gateways) expect(await status(gw, basic('alice', 'alice-pw'))).toBe(200);
    const list = await cli(['users', 'list']);
    expect(list.stdout).toMatch(/carol\s+ops/);
    expect(list.stdout).not.toContain('$2');
    // Groups changed: the allow rule judges by the new ones on both.
    expect((await cli(['users', 'groups', 'carol', '--set', 'dev'])).status).toBe(0);
    for (const gw of gateways) {
      const admin = await fetch(`${gw.base}/v1/admin`, { headers: { authorization: basic('carol', 'carol-password') } });
      expect(admin.status).toBe(403);
      await admin.arrayBuffer();
    }
  });

  it('a name in the users file is refused by the CLI, naming it', async () => {
    const r = await cli(['users', 'add', 'alice', '--cost', '4'], 'another-password\n');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('user "alice" is in the users file');
  });

  it('a name that differs from one in the users file only by case is refused by the CLI (add and import), naming the file\'s', async () => {
    for (const name of ['Alice', 'ALICE', 'ａlice']) {
      const r = await cli(['users', 'add', name, '--cost', '4'], 'another-password\n');
      expect(r.status, name).toBe(2);
      expect(r.stderr).toContain(`user "${name}" differs from "alice" of the users file`);
    }
    const file = join(f.users.dir, 'cased.htpasswd');
    const { hashSync } = await import('../../src/credentials/bcrypt.js');
    writeFileSync(file, `Alice:${hashSync('other-password', { cost: 4 })}\n`);
    const imported = await cli(['users', 'import', file]);
    expect(imported.status).toBe(2);
    expect(imported.stderr).toContain('"Alice"');
    expect((await cli(['users', 'list'])).stdout).not.toMatch(/^(Alice|ALICE) /m);
  });

  it('one made before keeps working; a gateway starting warns naming it, and so does config check --connect', async () => {
    const { hashSync } = await import('../../src/credentials/bcrypt.js');
    // Written past the name checks, as a store user made before them was.
    expect(await gateways[0]!.gateway.storeUsers!.add('ALICE', hashSync('upper-alice-pw', { cost: 4 }), [])).toBe(true);
    try {
      await untilAll(basic('ALICE', 'upper-alice-pw'), 200, 6000);
      const logs: string[] = [];
      const third = await startGateway(gateways[0]!.gateway.config, { log: createLogger('info', (line) => logs.push(line)) });
      try {
        const started = Date.now();
        while (!logs.some((l) => l.includes('differ from a users-file name only by case'))) {
          if (Date.now() - started > 6000) throw new Error(`no warning at start:\n${logs.join('\n')}`);
          await new Promise((r) => setTimeout(r, 20));
        }
        const line = JSON.parse(logs.find((l) => l.includes('only by case'))!) as Record<string, unknown>;
        expect(line).toMatchObject({ level: 'warn', users: ['ALICE (file: alice)'] });
        expect(await status(third, basic('ALICE', 'upper-alice-pw'))).toBe(200);
        expect(await status(third, basic('alice', 'alice-pw'))).toBe(200);
      } finally {
        await third.close();
      }
      const check = await cli(['config', 'check', '--connect']);
      expect(check.stderr).toContain('warning: users.store: store user "ALICE" differs from "alice" of the users file only by case');
    } finally {
      await gateways[0]!.gateway.storeUsers!.remove('ALICE');
    }
  });

  it('users passwd: the old password stops working and the user\'s sessions end on both', async () => {
    expect((await cli(['users', 'add', 'dave', '--cost', '4'], 'dave-password\n')).status).toBe(0);
    await untilAll(basic('dave', 'dave-password'), 200, 1000);
    const tokens = await createTokens(gateways[0]!.base, 'dave', 'dave-password');
    for (const gw of gateways) expect(await status(gw, `Bearer ${tokens.accessToken}`)).toBe(200);
    const changed = await cli(['users', 'passwd', 'dave', '--cost', '4'], 'dave-new-password\n');
    expect(changed.status, changed.stderr).toBe(0);
    expect(changed.stdout).toContain('its sessions ended on every instance');
    for (const gw of gateways) {
      expect(await status(gw, basic('dave', 'dave-password'))).toBe(401);
      expect(await status(gw, `Bearer ${tokens.accessToken}`)).toBe(401);
    }
    await untilAll(basic('dave', 'dave-new-password'), 200, 1000);
  });

  it('users remove: 401 on both at once, and the user\'s sessions revoked on both', async () => {
    expect((await cli(['users', 'add', 'erin', '--cost', '4'], 'erin-password\n')).status).toBe(0);
    await untilAll(basic('erin', 'erin-password'), 200, 1000);
    const tokens = await createTokens(gateways[1]!.base, 'erin', 'erin-password');
    for (const gw of gateways) expect(await status(gw, `Bearer ${tokens.accessToken}`)).toBe(200);
    const removed = await cli(['users', 'remove', 'erin']);
    expect(removed.status, removed.stderr).toBe(0);
    expect(removed.stdout).toContain('its sessions ended on every instance');
    for (const gw of gateways) {
      expect(await status(gw, basic('erin', 'erin-password'))).toBe(401);
      expect(await status(gw, `Bearer ${tokens.accessToken}`)).toBe(401);
      const refresh = await fetch(`${gw.base}/v1/tokens/refresh`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ refreshToken: tokens.refreshToken }) });
      expect(refresh.status).toBe(401);
      await refresh.arrayBuffer();
    }
    expect((await cli(['users', 'remove', 'erin'])).status).toBe(2);
  });

  it('users remove while an instance\'s change channel is down: that instance refuses the password as soon as the command answers', async () => {
    expect((await cli(['users', 'add', 'hank', '--cost', '4'], 'hank-password\n')).status).toBe(0);
    await untilAll(basic('hank', 'hank-password'), 200, 1000);
    // The second instance stops hearing changes (its listening connections closed, not reconnected):
    // the removal's message never reaches it, and its mirror still holds hank.
    const table = gateways[1]!.gateway.storeUsers!.table as RedisTable<unknown>;
    const listeners = table.channel.connections;
    for (const redis of listeners) redis.disconnect(false);
    try {
      expect(await status(gateways[1]!, basic('hank', 'hank-password'))).toBe(200);
      // Removed in process (the CLI's start would take a good part of the mirror's re-read period).
      expect(await gateways[0]!.gateway.storeUsers!.remove('hank')).toBe(true);
      for (const gw of gateways) expect(await status(gw, basic('hank', 'hank-password'))).toBe(401);
    } finally {
      for (const redis of listeners) await redis.connect().catch(() => {});
    }
  });

  it('users added before a gateway starts sign in on it at once, as soon as it listens', async () => {
    expect((await cli(['users', 'add', 'gina', '--cost', '4'], 'gina-password\n')).status).toBe(0);
    const late = await startGateway(testConfig(f.users.file, {
      store: { kind: 'redis', url: f.redis.url, keyPrefix: 'su:', commandTimeoutMs: 2000 },
      users: { htpasswd: f.users.file, watch: false, store: true },
      upstreams: { up: { url: f.echo.url } },
      routes: [{ path: '/v1/x', upstream: 'up' }],
    }));
    try {
      expect(await status(late, basic('gina', 'gina-password'))).toBe(200);
    } finally {
      await late.close();
    }
  });

  it('users import: the lines of an htpasswd file, those in the store left as they are', async () => {
    const file = join(f.users.dir, 'more.htpasswd');
    const { hashSync } = await import('../../src/credentials/bcrypt.js');
    writeFileSync(file, `frank:${hashSync('frank-password', { cost: 4 })}\ncarol:${hashSync('x-password', { cost: 4 })}\n`);
    const r = await cli(['users', 'import', file]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('imported 1 user; already in the store, left as they are: carol');
    await untilAll(basic('frank', 'frank-password'), 200, 1000);
    await untilAll(basic('carol', 'carol-password'), 200, 1000);
  });
});
