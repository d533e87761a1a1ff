import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from '../support/poll.js';
import { createTokens, gatewayFixture } from '../support/fixtures.js';
import { startFcgiwrap, startNginx, type Nginx } from './support/nginx.js';
import { requireTool, run, type RunResult } from './support/tools.js';

/**
 * git over smart HTTP through the gateway: a bare repository served by git http-backend under nginx +
 * fcgiwrap (the upstream), and the git command line as the client, with Basic and with a bearer token.
 */

let work: string;
let fcgi: { socket: string; stop(): Promise<void> };
let upstream: Nginx;
let git: string;
let env: Record<string, string>;

const gw = gatewayFixture({
  users: { alice: 'alice-pw', bob: 'bob-pw' },
  echo: false,
  setupTimeoutMs: 30_000,
  before: async () => {
    git = requireTool('git');
    work = mkdtempSync(join(tmpdir(), 'gw-e2e-git-'));
    const home = join(work, 'home');
    mkdirSync(home);
    // A clean git: no system or user configuration of this machine, no prompts, no stored credentials.
    env = { HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '', SSH_ASKPASS: '' };
    writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = E2E\n\temail = e2e@example.invalid\n[init]\n\tdefaultBranch = main\n');

    const repos = join(work, 'repos');
    mkdirSync(repos);
    await ok(run(git, ['init', '--bare', '-q', join(repos, 'project.git')], { env }));
    const seed = join(work, 'seed');
    await ok(run(git, ['init', '-q', seed], { env }));
    writeFileSync(join(seed, 'README'), 'hello through the gateway\n');
    await ok(run(git, ['add', 'README'], { env, cwd: seed }));
    await ok(run(git, ['commit', '-q', '-m', 'seed'], { env, cwd: seed }));
    await ok(run(git, ['push', '-q', join(repos, 'project.git'), 'main'], { env, cwd: seed }));

    const backend = join((await ok(run(git, ['--exec-path'], { env }))).stdout.trim(), 'git-http-backend');
    fcgi = await startFcgiwrap(work);
    upstream = await startNginx((port) => `
    server {
      listen 127.0.0.1:${port};
      client_max_body_size 0;
      location ~ ^/git(/.*)$ {
        fastcgi_pass unix:${fcgi.socket};
        fastcgi_param SCRIPT_FILENAME ${backend};
        fastcgi_param GIT_PROJECT_ROOT ${repos};
        fastcgi_param GIT_HTTP_EXPORT_ALL "";
        fastcgi_param PATH_INFO $1;
        fastcgi_param QUERY_STRING $query_string;
        fastcgi_param REQUEST_METHOD $request_method;
        fastcgi_param CONTENT_TYPE $content_type;
        fastcgi_param CONTENT_LENGTH $content_length;
        fastcgi_param SERVER_PROTOCOL $server_protocol;
        fastcgi_param GATEWAY_INTERFACE CGI/1.1;
        fastcgi_param REMOTE_ADDR $remote_addr;
        # http-backend allows a push only with an authenticated user: the one the gateway vouches for.
        fastcgi_param REMOTE_USER $http_x_authenticated_user;
      }
    }`);
  },
  config: () => ({
    upstreams: { git: { url: `http://127.0.0.1:${upstream.port}` } },
    routes: [{ path: '/git', upstream: 'git' }],
  }),
  after: async () => {
    await upstream?.stop();
    await fcgi?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  },
});

async function ok(p: Promise<RunResult>): Promise<RunResult> {
  const r = await p;
  if (r.code !== 0) throw new Error(`exit ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

const repoUrl = (userinfo = '') => `http://${userinfo}127.0.0.1:${gw.port}/git/project.git`;
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** Commits `files` in `dir` and pushes main with the extra git arguments. */
async function commitAndPush(dir: string, files: Record<string, string | Buffer>, message: string, gitArgs: string[], extraEnv: Record<string, string> = {}) {
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  await ok(run(git, ['add', ...Object.keys(files)], { env, cwd: dir }));
  await ok(run(git, ['commit', '-q', '-m', message], { env, cwd: dir }));
  return ok(run(git, [...gitArgs, 'push', 'origin', 'main'], { env: { ...env, ...extraEnv }, cwd: dir, timeoutMs: 60_000 }));
}

describe('git smart HTTP through the gateway', () => {
  it('clones with Basic credentials in the URL; the upstream sees the user, never the Authorization header', async () => {
    const dir = join(work, 'clone-basic');
    await ok(run(git, ['clone', '-q', repoUrl('alice:alice-pw@'), dir], { env }));
    expect(readFileSync(join(dir, 'README'), 'utf8')).toBe('hello through the gateway\n');
    const lines = upstream.accessLog().filter((l) => l.includes('/git/project.git/'));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).toContain('user=alice via=basic');
      expect(line).toContain('auth=-');
    }
  });

  it('pushes with Basic from a credential helper, and the push is in the repository', async () => {
    const dir = join(work, 'push-basic');
    await ok(run(git, ['clone', '-q', repoUrl('alice:alice-pw@'), dir], { env }));
    await ok(run(git, ['remote', 'set-url', 'origin', repoUrl()], { env, cwd: dir }));
    const helper = ['-c', 'credential.helper=', '-c', 'credential.helper=!f() { echo username=alice; echo password=alice-pw; }; f'];
    await commitAndPush(dir, { 'basic.txt': 'pushed with Basic\n' }, 'basic push', helper);
    const check = join(work, 'check-basic');
    await ok(run(git, ['clone', '-q', repoUrl('alice:alice-pw@'), check], { env }));
    expect(readFileSync(join(check, 'basic.txt'), 'utf8')).toBe('pushed with Basic\n');
  });

  it('clones and pushes with a bearer token in http.extraHeader', async () => {
    const { accessToken } = await createTokens(gw.base, 'bob', 'bob-pw');
    const bearer = ['-c', `http.extraHeader=Authorization: Bearer ${accessToken}`];
    const dir = join(work, 'clone-bearer');
    await ok(run(git, [...bearer, 'clone', '-q', repoUrl(), dir], { env }));
    await commitAndPush(dir, { 'bearer.txt': 'pushed with a token\n' }, 'bearer push', bearer);
    // nginx writes its access line once the answer is out: under load, just after git has read it.
    const pushed = () => upstream.accessLog().find((l) => l.includes('POST /git/project.git/git-receive-pack') && l.includes('user=bob'));
    await eventually(() => pushed() !== undefined, 5000);
    const pushLine = pushed();
    expect(pushLine).toContain('via=bearer');
    expect(pushLine).toContain('auth=-');
  });

  it('pushes several MB in a chunked request body, byte for byte', async () => {
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    const bearer = ['-c', `http.extraHeader=Authorization: Bearer ${accessToken}`];
    const dir = join(work, 'push-large');
    await ok(run(git, [...bearer, 'clone', '-q', repoUrl(), dir], { env }));
    // Random bytes do not compress: the pack is larger than http.postBuffer (1 MiB), so git streams it chunked.
    const trace = join(work, 'curl-trace.log');
    await commitAndPush(dir, { 'large.bin': randomBytes(6 * 1024 * 1024) }, 'large push', bearer, { GIT_TRACE_CURL: trace, GIT_TRACE_CURL_NO_DATA: '1' });
    const sent = readFileSync(trace, 'utf8');
    expect(sent).toMatch(/=> Send header: POST \/git\/project\.git\/git-receive-pack/);
    expect(sent).toMatch(/=> Send header: Transfer-Encoding: chunked/i);
    // ... and it reached the upstream chunked too (streamed, not buffered into one Content-Length).
    expect(await eventually(() => upstream.accessLog().some((l) => l.includes('POST /git/project.git/git-receive-pack') && l.includes('te=chunked')), 5000)).toBe(true);

    const check = join(work, 'check-large');
    await ok(run(git, [...bearer, 'clone', '-q', repoUrl(), check], { env, timeoutMs: 60_000 }));
    expect(sha256(join(check, 'large.bin'))).toBe(sha256(join(dir, 'large.bin')));
  });

  it('a clone without credentials fails with git\'s own authentication error, and nothing reaches the upstream', async () => {
    const before = upstream.accessLog().length;
    const none = await run(git, ['clone', '-q', repoUrl(), join(work, 'clone-none')], { env });
    expect(none.code).toBe(128);
    // git got the 401 challenge and, with prompts off and no helper, had no credentials to offer.
    expect(none.stderr).toMatch(/could not read Username for 'http:\/\/127\.0\.0\.1:\d+': terminal prompts disabled/);

    const wrong = await run(git, ['clone', '-q', repoUrl('bob:wrong-password@'), join(work, 'clone-wrong')], { env });
    expect(wrong.code).toBe(128);
    expect(wrong.stderr).toMatch(/Authentication failed for 'http:\/\/127\.0\.0\.1:\d+\/git\/project\.git\/'/);
    expect(upstream.accessLog().length).toBe(before);
  });
});
