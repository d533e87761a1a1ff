import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { htpasswd, SECRET, type Users } from '../support/fixtures.js';
import { closedPort, loggedPort, startNode, waitForHttp } from '../support/process.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

// The built program, as an operator runs it (npm test builds first): what it prints, where, and its exit code.
const CLI = join(import.meta.dirname, '../../dist/src/main.js');
const PKG = (await import('../../package.json', { with: { type: 'json' } })).default as { version: string };

interface Run { status: number | null; stdout: string; stderr: string; ms: number }
function run(args: string[], env: Record<string, string> = {}, input?: string): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr, ms: Date.now() - started }));
    child.stdin.end(input);
  });
}

/** What a usage error must look like: one line naming the problem, then the usage; nothing on stdout, no stack. */
function expectUsageError(r: Run, line: string | RegExp, usage: RegExp = /^usage: auth-gateway <command> \[options\]$/m): void {
  expect(r.status).toBe(2);
  expect(r.stdout).toBe('');
  const [first, blank, ...rest] = r.stderr.split('\n');
  if (typeof line === 'string') expect(first).toBe(`auth-gateway: usage error: ${line}`);
  else expect(first).toMatch(line);
  expect(blank).toBe('');
  expect(rest.join('\n')).toMatch(usage);
  expect(r.stderr).not.toMatch(/\n\s+at |TypeError|ERR_PARSE_ARGS|"level"/);
}

let dir: string;
let users: Users;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gw-cli-usage-'));
  users = htpasswd({ alice: 'alice-pw' });
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  users.remove();
});

function configFile(yaml: string): string {
  const file = join(dir, `gateway-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, yaml);
  return file;
}

describe('help and version', () => {
  it('--help prints every command on stdout and exits 0', async () => {
    const r = await run(['--help']);
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    for (const c of ['serve', 'config check', 'users hash', 'sessions list', 'sessions revoke', 'lockout clear']) expect(r.stdout).toContain(`auth-gateway ${c} `);
  });

  it('<command> --help prints that command\'s usage and options', async () => {
    const r = await run(['sessions', 'list', '--help']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: auth-gateway sessions list --user NAME \[--config FILE\]\n/);
    expect(r.stdout).toContain('--user NAME');
    expect(r.stdout).not.toContain('--watch');
    expect((await run(['serve', '-h'])).stdout).toMatch(/^usage: auth-gateway serve \[--config FILE\] \[--watch\]\n/);
  });

  it('--version prints the package version', async () => {
    const r = await run(['--version']);
    expect(r).toMatchObject({ status: 0, stdout: `auth-gateway ${PKG.version}\n`, stderr: '' });
  });
});

describe('usage errors: one line, the usage, exit 2, no stack trace', () => {
  it('an unknown option, with the nearest one, and the command\'s usage', async () => {
    expectUsageError(await run(['serve', '--confg', 'x.yaml']), 'unknown option --confg; did you mean --config?', /^usage: auth-gateway serve /m);
  });

  // One process per test: on a loaded machine a start of the program can take seconds.
  it.each([
    [['frobnicate'], 'unknown command "frobnicate"', undefined],
    [['config', 'chek'], 'unknown command "config chek"; did you mean "config check"?', undefined],
    [[], 'no command given', undefined],
    [['serve', '--user', 'alice'], '--user is not an option of serve', 'serve'],
    [['config', 'check', '--config'], '--config needs a value', 'config check'],
    [['config', 'check', '--connect=yes'], '--connect takes no value', 'config check'],
    [['users', 'hash'], 'users hash needs NAME', 'users hash'],
    [['serve', 'now'], 'serve takes no arguments; unexpected "now"', 'serve'],
    // A missing required option is a usage error, not a configuration error.
    [['sessions', 'list'], 'sessions list needs --user NAME', 'sessions list'],
    [['lockout', 'clear'], 'lockout clear needs --user NAME, --address IP or both', 'lockout clear'],
    [['users', 'hash', 'erin', '--cost', '3'], '--cost must be an integer from 4 to 31', 'users hash'],
  ] as Array<[string[], string, string | undefined]>)('%j: %s', async (args, line, command) => {
    const usage = command ? new RegExp(`^usage: auth-gateway ${command} `, 'm') : undefined;
    expectUsageError(await run(args, {}, 'long-enough-pw\n'), line, usage);
  });
});

describe('users hash', () => {
  it('refuses a password shorter than 8 characters, labelled as such, and prints no line', async () => {
    const r = await run(['users', 'hash', 'erin', '--cost', '4'], {}, 'x\n');
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('auth-gateway: password refused: the password must have at least 8 characters (it has 1); nothing was written');
    const ok = await run(['users', 'hash', 'erin', '--cost', '4'], {}, '12345678\n');
    expect(ok.status).toBe(0);
    expect(ok.stdout).toMatch(/^erin:\$2b\$04\$/);
  });
});

describe('commands that talk to the store', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.destroy();
  });

  /** The shipped layout: the secret comes from the environment, which a store command does not need. */
  const yaml = (storeUrl: string) => [
    `store: { kind: redis, url: "${storeUrl}" }`,
    `users: { htpasswd: ${join(dir, 'not-here.htpasswd')} }`,
    'tokens: { signing: { alg: HS256, secret: "${GATEWAY_JWT_SECRET}" } }',
    '',
  ].join('\n');

  it('sessions list needs only the store settings: no GATEWAY_JWT_SECRET, no users file', async () => {
    const r = await run(['sessions', 'list', '--user', 'alice', '--config', configFile(yaml(redis.url))]);
    expect(r.stderr).toBe('');
    expect(r).toMatchObject({ status: 0, stdout: 'no live sessions for user "alice"\n' });
  });

  it('still refuses a broken store section, as a configuration error', async () => {
    const r = await run(['sessions', 'list', '--user', 'alice', '--config', configFile(yaml('http://nope'))]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe('auth-gateway: invalid configuration:\n  - store.url (line 1, column 23) must be a redis: or rediss: URL; found "http://nope"\n');
  });

  it('an unreachable store is labelled store unreachable, exits 1, within about the connect timeout', async () => {
    const closed = await closedPort();
    const baseline = (await run(['--version'])).ms;
    const r = await run(['sessions', 'revoke', '--user', 'alice', '--config', configFile(yaml(`redis://127.0.0.1:${closed}`))]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^auth-gateway: store unreachable: the store did not answer within store\.connectTimeoutMs \(1000 ms\); nothing was changed\n$/);
    // Over a bare start of the program: the 1 s connect timeout, not 2 s more plus a lingering reconnect timer.
    expect(r.ms - baseline).toBeLessThan(2500);
  });

  it('lockout clear on an unreachable store is labelled store unreachable and exits 1, as sessions does (was invalid configuration, 2)', async () => {
    const closed = await closedPort();
    const r = await run(['lockout', 'clear', '--user', 'alice', '--config', configFile(yaml(`redis://127.0.0.1:${closed}`))]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^auth-gateway: store unreachable: the store did not answer within \d+ ms; nothing was changed\n$/);
  });
});

describe('serve with the store not reachable', () => {
  it('waits only the store\'s connect timeout before it serves anyway (was a fixed 5 s)', async () => {
    const file = configFile([
      'server: { host: 127.0.0.1, port: 0 }',
      `store: { kind: redis, url: "redis://127.0.0.1:${await closedPort()}", connectTimeoutMs: 500 }`,
      `users: { htpasswd: ${users.file}, watch: false }`,
      `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
      'admin: false',
      '',
    ].join('\n'));
    const child = startNode(CLI, ['serve', '--config', file], {});
    try {
      await expect.poll(() => child.output().includes('redis unavailable'), { timeout: 10_000 }).toBe(true);
      const refusedAt = Date.now();
      const port = await loggedPort(child, 'auth-gateway listening', 10_000);
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, child, 10_000);
      expect(Date.now() - refusedAt).toBeLessThan(2500);
      expect(child.output()).toContain('redis not reachable yet; serving anyway');
    } finally {
      await child.stop();
    }
  });
});

describe('config check --connect', () => {
  let notFound: Server;
  let notFoundUrl: string;
  beforeAll(async () => {
    notFound = createServer((_req, res) => res.writeHead(404).end());
    await new Promise<void>((resolve) => notFound.listen(0, '127.0.0.1', resolve));
    notFoundUrl = `http://127.0.0.1:${(notFound.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => notFound.close(() => resolve())));

  const yaml = (storeUrl: string, upstreams: string[]) => [
    `store: { kind: redis, url: "${storeUrl}" }`,
    `users: { htpasswd: ${users.file} }`,
    `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
    'upstreams:',
    ...upstreams.map((u, i) => `  u${i}: { url: "${u}" }`),
    'routes:',
    ...upstreams.map((_, i) => `  - { path: /v1/u${i}, upstream: u${i} }`),
    '',
  ].join('\n');

  it('says that a healthy upstream\'s 404 passes; an unreachable store and upstream are labelled connection check failed, fast', async () => {
    const closedRedis = await closedPort();
    const closedUp = await closedPort();
    const baseline = (await run(['--version'])).ms;
    const r = await run(['config', 'check', '--connect', '--config', configFile(yaml(`redis://127.0.0.1:${closedRedis}`, [notFoundUrl, `http://127.0.0.1:${closedUp}`]))]);
    expect(r.status).toBe(2);
    expect(r.stdout).toMatch(new RegExp(`upstream u0 ${notFoundUrl}: answered HTTP 404 in \\d+ ms: reachable, passes \\(any HTTP status does\\)`));
    expect(r.stderr).toBe([
      'auth-gateway: connection check failed:',
      `  - store redis://127.0.0.1:${closedRedis} is not ready: refused`,
      `  - upstream u1 http://127.0.0.1:${closedUp} does not answer: ECONNREFUSED`,
      '',
    ].join('\n'));
    expect(r.stderr).not.toContain('invalid configuration');
    // Was 7.6 s: a 5 s wait for a store that had already refused, then a lingering reconnect timer.
    expect(r.ms - baseline).toBeLessThan(2500);
  });
});

describe('configuration errors', () => {
  it('config check names the line and column of an unknown key and of a bad value, with the value found but never a secret', async () => {
    const file = configFile([
      `users: { htpasswd: ${users.file} }`,
      'tokens:',
      '  signing: { alg: HS256, secret: "not-long-enough-hunter2" }',
      'server:',
      '  prot: 8081',
      '  shutdownGraceMs: soon',
      '',
    ].join('\n'));
    const r = await run(['config', 'check', '--config', file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe([
      'auth-gateway: invalid configuration:',
      '  - server.prot (line 5, column 3) is not a known setting; did you mean port?',
      '  - server.shutdownGraceMs (line 6, column 3) must be a non-negative integer; found "soon"',
      '  - tokens.signing.secret (line 3, column 26) must be at least 32 bytes long; found (hidden)',
      '',
    ].join('\n'));
    expect(r.stderr).not.toContain('hunter2');
  });

  it('with REDIS_URL set, a misspelt store.kind is still reported', async () => {
    const file = configFile(`store: { kind: redsi }\nusers: { htpasswd: ${users.file} }\ntokens: { signing: { alg: HS256, secret: "${SECRET}" } }\n`);
    const r = await run(['config', 'check', '--config', file], { REDIS_URL: 'redis://127.0.0.1:6379' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('  - store.kind (line 1, column 10) must be one of memory, redis; found "redsi"\n');
  });

  it.each([
    ['a line indented under a key that has a value', 'server:\n  port: 8080\n host: x\n'],
    ['an over-indented key after a scalar', 'a: 1\nb: 2\n c: 3\n'],
    ['an unclosed quote', 'server:\n  port: 8080\n  host: "0.0.0.0\n'],
    ['an unclosed flow sequence', 'server:\n  port: 8080\n  host: [127.0.0.1\nlog: {}\n'],
  ])('a YAML error on line 3 is reported at line 3: %s', async (_name, text) => {
    const r = await run(['config', 'check', '--config', configFile(text)]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^auth-gateway: invalid configuration:\n {2}- \S+ is not valid YAML: line 3, column \d+: /);
  });
});
