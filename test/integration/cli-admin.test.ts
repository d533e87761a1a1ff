import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { RedisSessionStore } from '../../src/stores/sessions/redis-session-store.js';
import { createTokens, gatewayFixture, postJson, SECRET } from '../support/fixtures.js';

// The operator commands, run as the built CLI (a process of its own) against the Redis a running
// gateway uses: what they change is seen by the gateway at once.

const CLI = join(import.meta.dirname, '../../dist/src/main.js');

const lockout = { maxFailuresPerUser: 2, maxFailuresPerAccount: 3, addressBurst: 3, addressFailuresPerMinute: 1 };
const gw = gatewayFixture({
  users: { alice: 'alice-pw', bob: 'bob-pw' },
  redis: true,
  config: (f) => ({
    server: { host: '127.0.0.1', port: 0, trustProxy: 1 },
    store: { kind: 'redis', url: f.redis.url, keyPrefix: 'cli:' },
    lockout,
    upstreams: { up: { url: f.echo.url } },
    routes: [{ path: '/v1/x', upstream: 'up' }],
  }),
});
let configFile: string;

function cli(args: string[], file = configFile): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args, '--config', file], { env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

beforeAll(async () => {
  expect(await (gw.gateway.store as RedisSessionStore).waitUntilReady(5000)).toBe(true);
  configFile = join(gw.users.dir, 'gateway.yaml');
  writeFileSync(configFile, [
    `store: { kind: redis, url: "${gw.redis.url}", keyPrefix: "cli:" }`,
    `users: { htpasswd: ${gw.users.file} }`,
    `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
    `lockout: ${JSON.stringify(lockout)}`,
    'admin: false',
  ].join('\n'));
});

const create = (appKey: string, appSecret: string, address: string) =>
  postJson(gw.base, '/v1/tokens/create', { appKey, appSecret }, { 'x-forwarded-for': address });

describe('auth-gateway lockout clear', () => {
  it('--address lifts the throttle of a guessing address; --user lifts an account lock', async () => {
    // 198.51.100.7 guesses three made-up names: throttled for a minute (one failure a minute).
    for (const name of ['m1', 'm2', 'm3']) expect((await create(name, 'guess', '198.51.100.7')).status).toBe(401);
    expect((await create('bob', 'bob-pw', '198.51.100.7')).status).toBe(429);
    const byAddress = await cli(['lockout', 'clear', '--address', '198.51.100.7']);
    expect(byAddress.stderr).toBe('');
    expect(byAddress).toMatchObject({ status: 0, stdout: 'cleared the throttle of address 198.51.100.7\n' });
    expect((await create('bob', 'bob-pw', '198.51.100.7')).status).toBe(200);
    // Its burst is back too: two more guesses are answered, not throttled after the first.
    for (const name of ['m4', 'm5']) expect((await create(name, 'guess', '198.51.100.7')).status).toBe(401);

    // alice guessed at from three addresses: the account is locked everywhere.
    for (const a of ['192.0.2.1', '192.0.2.2', '192.0.2.3']) expect((await create('alice', 'guess', a)).status).toBe(401);
    expect((await create('alice', 'alice-pw', '192.0.2.9')).status).toBe(429);
    const byUser = await cli(['lockout', 'clear', '--user', 'alice']);
    expect(byUser).toMatchObject({ status: 0, stdout: 'cleared every lock of user "alice" (its account lock and its locks from every address)\n' });
    expect((await create('alice', 'alice-pw', '192.0.2.9')).status).toBe(200);
  });

  it('--user alone lifts the user\'s lock at one address (no --address needed)', async () => {
    // Two wrong passwords from one address: alice is locked there, not elsewhere.
    for (let i = 0; i < 2; i++) expect((await create('alice', 'guess', '203.0.113.5')).status).toBe(401);
    expect((await create('alice', 'alice-pw', '203.0.113.5')).status).toBe(429);
    expect((await create('alice', 'alice-pw', '203.0.113.6')).status).toBe(200);
    const byUser = await cli(['lockout', 'clear', '--user', 'alice']);
    expect(byUser).toMatchObject({ status: 0, stderr: '' });
    expect((await create('alice', 'alice-pw', '203.0.113.5')).status).toBe(200);
  });

  it('--address must be an IP address: a usage error (exit 2, then the command\'s usage), before the configuration is read', async () => {
    for (const address of ['999.1.1.1', 'example.org', '10.0.0.1/8']) {
      const res = await cli(['lockout', 'clear', '--address', address]);
      expect(res.status).toBe(2);
      expect(res.stdout).toBe('');
      expect(res.stderr).toMatch(new RegExp(`^auth-gateway: usage error: lockout clear --address: "${address.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}" is not an IPv4 or IPv6 address\n\nusage: auth-gateway lockout clear `));
    }
    // A configuration that cannot be read is not what is wrong with this command line.
    const spawned = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'lockout', 'clear', '--address', '999.1.1.1', '--config', join(gw.users.dir, 'absent.yaml')], { env: { PATH: process.env.PATH } });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (status) => resolve({ status, stderr }));
    });
    expect(spawned.status).toBe(2);
    expect(spawned.stderr).toMatch(/^auth-gateway: usage error: lockout clear --address: "999\.1\.1\.1"/);
    expect((await cli(['lockout', 'clear', '--address', '2001:db8::1'])).status).toBe(0);
  }, 60_000);

  it('without --user or --address it says what it needs; on the memory store it says why it cannot', async () => {
    const none = await cli(['lockout', 'clear']);
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/needs --user NAME, --address IP or both/);
    const memoryFile = join(gw.users.dir, 'memory.yaml');
    writeFileSync(memoryFile, `users: { htpasswd: ${gw.users.file} }\ntokens: { signing: { alg: HS256, secret: "${SECRET}" } }\nadmin: false\n`);
    const memory = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'lockout', 'clear', '--user', 'alice', '--config', memoryFile], { env: { PATH: process.env.PATH } });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (status) => resolve({ status, stderr }));
    });
    expect(memory.status).toBe(2);
    expect(memory.stderr).toMatch(/store\.kind is memory, which lives inside the gateway process/);
  });
});

describe('auth-gateway sessions', () => {
  it('list shows a user\'s live sessions (no token, no hash); revoke ends them on the running gateway at once', async () => {
    // bob signed in during the lockout test: start from none.
    expect((await cli(['sessions', 'revoke', '--user', 'bob'])).status).toBe(0);
    const a = await createTokens(gw.base, 'bob', 'bob-pw');
    const b = await createTokens(gw.base, 'bob', 'bob-pw');
    const listed = await cli(['sessions', 'list', '--user', 'bob']);
    expect(listed.stderr).toBe('');
    expect(listed.status).toBe(0);
    const lines = listed.stdout.trim().split('\n');
    expect(lines[0]).toBe('2 live sessions for user "bob":');
    expect(lines).toHaveLength(4);
    for (const pair of [a, b]) {
      expect(listed.stdout).toContain(pair.refreshToken.split('.')[0]);
      expect(listed.stdout).not.toContain(pair.refreshToken.split('.')[1]);
    }
    const use = (token: string) => fetch(`${gw.base}/v1/x/y`, { headers: { authorization: `Bearer ${token}` } });
    expect((await use(a.accessToken)).status).toBe(200);

    const revoked = await cli(['sessions', 'revoke', '--user', 'bob']);
    expect(revoked).toMatchObject({ status: 0, stdout: 'revoked 2 sessions of user "bob"\n' });
    // Synchronous revocation: once the command has answered, no instance accepts the tokens.
    for (const pair of [a, b]) {
      expect((await use(pair.accessToken)).status).toBe(401);
      expect((await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken })).status).toBe(401);
    }
    expect((await cli(['sessions', 'list', '--user', 'bob'])).stdout).toBe('no live sessions for user "bob"\n');
    expect((await cli(['sessions', 'list'])).stderr).toMatch(/sessions list needs --user NAME/);
  });
});

describe('what the store or the users file does not allow is said as such, not as a configuration error', () => {
  let storeFile: string;
  beforeAll(() => {
    storeFile = join(gw.users.dir, 'store-users.yaml');
    writeFileSync(storeFile, [
      `store: { kind: redis, url: "${gw.redis.url}", keyPrefix: "cli:" }`,
      `users: { htpasswd: ${gw.users.file}, store: true }`,
      `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
      'apiKeys: true',
      'admin: false',
    ].join('\n'));
  });

  it('keys revoke and keys rotate of an id the store does not have: no such key, exit 2', async () => {
    for (const command of [['keys', 'revoke', 'nosuch'], ['keys', 'rotate', 'nosuch']]) {
      const r = await cli(command, storeFile);
      expect(r).toMatchObject({ status: 2, stdout: '' });
      expect(r.stderr).toBe('auth-gateway: no such key: there is no key nosuch (keys list shows them); nothing was changed\n');
    }
  });

  it('users add of a name in the users file: a users-file name, exit 2, nothing written', async () => {
    const r = await cli(['users', 'add', 'alice'], storeFile);
    expect(r).toMatchObject({ status: 2, stdout: '' });
    expect(r.stderr).toBe(`auth-gateway: users-file name: user "alice" is in the users file (${gw.users.file}); a name may be in only one source: nothing was changed\n`);
    expect((await cli(['users', 'list'], storeFile)).stdout).not.toMatch(/^alice /m);
  });

  it('users import of a file it cannot read or take: import refused, exit 2, naming the file', async () => {
    const missing = join(gw.users.dir, 'not-here.htpasswd');
    const r = await cli(['users', 'import', missing], storeFile);
    expect(r).toMatchObject({ status: 2, stdout: '' });
    expect(r.stderr).toBe(`auth-gateway: import refused: ${missing} cannot be read: ENOENT\n`);
    const bad = join(gw.users.dir, 'plain.htpasswd');
    writeFileSync(bad, 'zoe:plaintext\n');
    const refused = await cli(['users', 'import', bad], storeFile);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/^auth-gateway: import refused: \S+plain\.htpasswd:1 \(user "zoe"\) is not a bcrypt hash/);
  });

  it('users remove, passwd and groups of a name the store does not have: no such user, exit 2', async () => {
    const r = await cli(['users', 'remove', 'nosuch'], storeFile);
    expect(r).toMatchObject({ status: 2, stdout: '' });
    expect(r.stderr).toBe('auth-gateway: no such user: there is no user "nosuch" in the store (users list shows them)\n');
    expect((await cli(['users', 'groups', 'nosuch', '--set', 'ops'], storeFile)).stderr).toMatch(/^auth-gateway: no such user: /);
  });
});
