import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verify } from '../../src/credentials/bcrypt.js';
import { echoUpstream, htpasswd, type EchoUpstream, type Users } from '../support/fixtures.js';
import { closedPort } from '../support/process.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

// The built CLI, as operators run it (npm test builds first).
const CLI = join(import.meta.dirname, '../../dist/src/main.js');
const SECRET = 'cli-test-secret-cli-test-secret-0123456789';
const run = (args: string[], input?: string) =>
  spawnSync(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH }, input, encoding: 'utf8', timeout: 15_000 });

/** Asynchronous, so servers of this test process (the echo upstream) can answer while the CLI runs. */
function runAsync(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

let dir: string;
let users: Users;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gw-cli-'));
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

describe('config check', () => {
  it('a retired setting of an earlier release: config check exits 0 and says what to write; serve starts and logs the same', async () => {
    const file = configFile([
      `users: { htpasswd: ${users.file} }`,
      `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
      'upstreams: { up: { url: "http://127.0.0.1:9001" } }',
      'routes: [{ path: /api, upstream: up }]',
      'lockout: { maxFailuresPerAddress: 50 }',
      'server: { host: 127.0.0.1, port: 0 }',
      'admin: false',
    ].join('\n'));
    const r = run(['config', 'check', '--config', file]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('auth-gateway: warning: lockout.maxFailuresPerAddress (line 5) is retired');
    expect(r.stderr).toContain('write addressBurst: 50 instead');
    const child = spawn(process.execPath, [CLI, 'serve', '--config', file], { env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const deadline = Date.now() + 10_000;
      while (!out.includes('auth-gateway listening') && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(out).toContain('auth-gateway listening');
      expect(out).toMatch(/"warning":"lockout\.maxFailuresPerAddress \(line 5\) is retired[^"]*read as lockout\.addressBurst: 50/);
    } finally {
      child.kill('SIGINT');
    }
  });

  it('reports every problem in one pass: schema, misspelled keys, and the files it names', () => {
    const file = configFile(`
servr: { port: 8080 }
users: { htpasswd: ${join(dir, 'missing.htpasswd')} }
tokens:
  signing: { alg: RS256, privateKeyFile: ${join(dir, 'missing-key.pem')} }
lockout: { maxFailuresPerUser: -1 }
server: { tls: { certFile: ${join(dir, 'missing-cert.pem')}, keyFile: ${join(dir, 'missing-cert.key')} } }
`);
    const r = run(['config', 'check', '--config', file]);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('  - ')).map((l) => l.slice(4));
    expect(lines).toEqual([
      'servr (line 2, column 1) is not a known setting; did you mean server?',
      'lockout.maxFailuresPerUser (line 6, column 12) must be a positive integer; found -1',
      expect.stringMatching(/^users\.htpasswd: .*missing\.htpasswd cannot be read: ENOENT$/),
      expect.stringMatching(/^tokens\.signing: .*missing-key\.pem/),
      expect.stringMatching(/^server\.tls\.certFile: .*missing-cert\.pem cannot be read: ENOENT$/),
    ]);
  });

  it('prints warnings about allow rules on stderr, naming key and line, and still exits 0; refuses a method no request can have', () => {
    const groups = join(dir, 'users.groups');
    writeFileSync(groups, 'admins: alice\n');
    const yaml = (methods: string) => [
      `users: { htpasswd: ${users.file}, groups: ${groups} }`,
      `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
      'upstreams: { up: { url: "http://127.0.0.1:9001" } }',
      'routes:',
      '  - { path: /api, upstream: up }',
      '  - path: /api/admin',
      '    upstream: up',
      `    allow: { users: [alcie], groups: [admin], methods: [${methods}] }`,
      '',
    ].join('\n');
    const warned = run(['config', 'check', '--config', configFile(yaml('get'))]);
    expect(warned.status).toBe(0);
    expect(warned.stderr.split('\n')).toEqual([
      'auth-gateway: warning: routes[1].allow.methods[0] (line 8) is get: methods are upper case; read as GET (write GET)',
      expect.stringMatching(/^auth-gateway: warning: routes\[1\]\.path \(line 6\) \/api\/admin has allow rules, but routes\[0\]\.path \(line 5\) \/api, above it, has none: /),
      'auth-gateway: warning: routes[1].allow.users[0] (line 8) is "alcie", who is not in the users file (users.htpasswd): this entry lets no one into /api/admin; did you mean alice?',
      'auth-gateway: warning: routes[1].allow.groups[0] (line 8) is "admin", a group with no members in the groups file (users.groups): this entry lets no one into /api/admin; did you mean admins?',
      '',
    ]);
    expect(warned.stdout).toMatch(/: ok \(2 routes, 1 upstreams, 1 users, store memory; 4 warnings above\)\n$/);

    const refused = run(['config', 'check', '--config', configFile(yaml('GET, FETCH'))]);
    expect(refused.status).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain('\n  - routes[1].allow.methods[1] (line 8, column 62) is FETCH, which is not an HTTP method the gateway can receive: no request would ever match it\n');
  });

  it('shows a YAML syntax error with its line and column', () => {
    const r = run(['config', 'check', '--config', configFile('server:\n  port: 8080\n  host: "0.0.0.0\n')]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/gateway-\w+\.yaml is not valid YAML: line \d+, column \d+: /);
  });

  describe('--connect', () => {
    let redis: TestRedis;
    let echo: EchoUpstream;
    beforeAll(async () => {
      redis = await startRedis();
      echo = await echoUpstream();
    });
    afterAll(async () => {
      await echo.close();
      await redis.destroy();
    });
    const yaml = (storeUrl: string, contactsUrl: string) => `
store: { kind: redis, url: "${storeUrl}" }
users: { htpasswd: ${users.file} }
tokens: { signing: { alg: HS256, secret: "${SECRET}" } }
upstreams:
  conversations: { url: "${echo.url}" }
  contacts: { url: "${contactsUrl}", timeoutMs: 1000 }
routes:
  - { path: /v1/conversations, upstream: conversations }
  - { path: /v1/contacts, upstream: contacts }
`;

    it('checks that the store is ready as the gateway would use it (a writable master) and each upstream answers, naming each', async () => {
      const r = await runAsync(['config', 'check', '--connect', '--config', configFile(yaml(redis.url, echo.url))]);
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`store ${redis.url}: ready \\(a writable master\\) in \\d+ ms`));
      expect(r.stdout).toContain(`upstream conversations ${echo.url}: answered HTTP 200`);
      expect(r.stdout).toContain(`upstream contacts ${echo.url}: answered HTTP 200`);
      expect(r.stdout).toMatch(/: ok \(2 routes, 2 upstreams, 1 users, store redis\)\n$/);
    });

    it('names the store and the upstream that do not answer, and exits 2', async () => {
      const closedA = await closedPort();
      const closedB = await closedPort();
      const r = await runAsync(['config', 'check', '--connect', '--config', configFile(yaml(`redis://:hunter2@127.0.0.1:${closedA}`, `http://127.0.0.1:${closedB}`))]);
      expect(r.status).toBe(2);
      expect(r.stdout).toContain(`upstream conversations ${echo.url}: answered HTTP 200`);
      expect(r.stderr).toContain(`store redis://:***@127.0.0.1:${closedA} is not ready: refused`);
      expect(r.stderr).toContain(`upstream contacts http://127.0.0.1:${closedB} does not answer: ECONNREFUSED`);
      expect(r.stderr + r.stdout).not.toContain('hunter2');
    });
  });
});

describe('serve: the exit codes of --help, docs/operating.md and README.md', () => {
  const serveYaml = (server: string, admin: string) => [
    `server: { host: 127.0.0.1, ${server} }`,
    `users: { htpasswd: ${users.file}, watch: false }`,
    `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
    `admin: ${admin}`,
    '',
  ].join('\n');

  async function withTakenPort(test: (port: number) => Promise<void>): Promise<void> {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      await test((taken.address() as { port: number }).port);
    } finally {
      taken.close();
    }
  }

  function expectFatal(r: { status: number | null; stdout: string }): void {
    expect(r.status).toBe(1);
    const last = JSON.parse(r.stdout.trimEnd().split('\n').at(-1)!) as Record<string, string>;
    expect(last).toMatchObject({ level: 'error', msg: 'fatal' });
    expect(last.error).toContain('EADDRINUSE');
  }

  it('exits 1 (the gateway failed) with the reason in its log, last, when its port is taken', async () => {
    await withTakenPort(async (port) => expectFatal(await runAsync(['serve', '--config', configFile(serveYaml(`port: ${port}`, 'false'))])));
  });

  it('exits 1 with the reason in its log, last, when the admin port is taken', async () => {
    await withTakenPort(async (port) => expectFatal(await runAsync(['serve', '--config', configFile(serveYaml('port: 0', `{ host: 127.0.0.1, port: ${port} }`))])));
  });

  it('exits 2 (fix the file) on a configuration it refuses, before it listens', async () => {
    const r = await runAsync(['serve', '--config', configFile(serveYaml('port: 0, shutdownGraceMs: -1', 'false'))]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe('auth-gateway: invalid configuration:\n  - server.shutdownGraceMs (line 1, column 37) must be a non-negative integer; found -1\n');
    expect(r.stdout).toBe('');
  });

  it('exits 2 (fix the command line) on a usage error', async () => {
    const r = await runAsync(['serve', '--confg', 'x.yaml']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^auth-gateway: usage error: unknown option --confg; did you mean --config\?\n/);
  });

  it('--help, docs/operating.md and README.md give the same exit codes', () => {
    const help = run(['--help']).stdout;
    const line = /^Exit codes: .*$/m.exec(help)?.[0];
    expect(line).toBe('Exit codes: 0 done, 1 the gateway failed (to start or while running) or the store could not be reached, 2 a usage, configuration or input error, 130 cancelled.');
    const readme = readFileSync(join(import.meta.dirname, '../../README.md'), 'utf8').replace(/\s*\n\s*/g, ' ');
    expect(readme).toContain(line!.replace(/\.$/, ''));
    const operating = readFileSync(join(import.meta.dirname, '../../docs/operating.md'), 'utf8');
    const rows = Object.fromEntries([...operating.matchAll(/^\| `([^`]+)` \| (\d+) \|/gm)].map((m) => [m[1], Number(m[2])]));
    expect(rows).toEqual({
      'usage error': 2, 'invalid configuration': 2, 'connection check failed': 2, 'password refused': 2,
      'no such key': 2, 'no such user': 2, 'users-file name': 2, 'import refused': 2, 'user exists': 2,
      'store unreachable': 1, fatal: 1, cancelled: 130,
    });
  });
});

/**
 * Drives `users hash` on a real pseudo-terminal (Python's pty module): waits for each prompt, types the
 * answer and Enter, then returns everything the terminal showed and the exit code.
 */
function onTerminal(args: string[], typed: Array<[prompt: string, keys: string]>): { screen: string; status: number } {
  const driver = `
import json, os, pty, select, sys, time
node, cli, args, typed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
pid, fd = pty.fork()
if pid == 0:
    os.execv(node, [node, cli] + args)
out = b''
def read(until=None, timeout=10.0):
    global out
    end = time.time() + timeout
    while time.time() < end and (until is None or until.encode() not in out):
        r, _, _ = select.select([fd], [], [], 0.1)
        if not r:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            return
        if not data:
            return
        out += data
seen = 0
for prompt, keys in typed:
    read(prompt)
    os.write(fd, keys.encode())
read()
_, status = os.waitpid(pid, 0)
print(json.dumps({'screen': out.decode('utf-8', 'replace'), 'status': os.waitstatus_to_exitcode(status)}))
`;
  const r = spawnSync('python3', ['-c', driver, process.execPath, CLI, JSON.stringify(args), JSON.stringify(typed)], { encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) throw new Error(`pty driver failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { screen: string; status: number };
}

describe('users hash', () => {
  it('on a terminal asks twice without echoing, and prints a line that verifies', async () => {
    const { screen, status } = onTerminal(['users', 'hash', 'erin', '--cost', '4'], [
      ['Password for erin: ', 'erin-s3cret-pwX\x7f\r'],
      ['Again: ', 'erin-s3cret-pw\r'],
    ]);
    expect(status).toBe(0);
    expect(screen).toContain('warning: bcrypt cost 4 is below 10');
    expect(screen).not.toContain('s3cret');
    const line = /erin:(\$2b\$04\$[./A-Za-z0-9]{53})/.exec(screen);
    expect(line).not.toBeNull();
    expect(await verify('erin-s3cret-pw', line![1]!)).toBe(true);
  });

  it('on a terminal refuses two different answers and prints no line', () => {
    const { screen, status } = onTerminal(['users', 'hash', 'erin', '--cost', '10'], [
      ['Password for erin: ', 'one-password\r'],
      ['Again: ', 'another-password\r'],
    ]);
    expect(status).toBe(2);
    expect(screen).toContain('auth-gateway: password refused: the passwords do not match; nothing was written');
    expect(screen).not.toContain('warning');
    expect(screen).not.toMatch(/erin:\$2/);
    expect(screen).not.toContain('password\r');
  });

  it('on a terminal, Ctrl-C cancels without a line', () => {
    const { screen, status } = onTerminal(['users', 'hash', 'erin', '--cost', '4'], [['Password for erin: ', 'abc\x03']]);
    expect(status).toBe(130);
    expect(screen).not.toMatch(/erin:\$2/);
  });

  it('from a pipe reads stdin as before; a cost below 10 is warned about on stderr, a cost out of range refused', () => {
    const r = run(['users', 'hash', 'erin', '--cost', '4'], 'erin-password\n');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^erin:\$2b\$04\$[./A-Za-z0-9]{53}\n$/);
    expect(r.stderr).toContain('warning: bcrypt cost 4 is below 10');
    expect(run(['users', 'hash', 'erin', '--cost', '3'], 'pw\n').stderr).toContain('--cost must be an integer from 4 to 31');
  });
});
