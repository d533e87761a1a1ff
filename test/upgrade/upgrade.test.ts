import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, echoUpstream, htpasswd, type EchoUpstream, type Users } from '../support/fixtures.js';
import { loggedPort, startNode, type Child } from '../support/process.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { builtRelease, recordedReleases, ROOT, type Release } from './releases.js';

/**
 * Upgrade and rollback, as operators do them: instances of a recorded earlier release (built from git,
 * see releases.ts) and of the current build, side by side on one real Redis, all started by the built
 * CLI (`serve --config FILE`) from the earlier release's configuration file, unchanged. Each release is
 * run in turn:
 *
 * - upgrade: the earlier release runs and holds state (token pairs, API keys, store users, a lockout, a
 *   rate-limit bucket); the current one starts beside it; what either made works on both, a refresh on
 *   one works on the other, a revocation on either holds on both at once; then the earlier one stops;
 * - rollback: the current one stops and the earlier one starts again: what was made before the upgrade
 *   still works, and what the current one made is understood or refused cleanly (401 with a problem
 *   body), never a 500, and the earlier release keeps serving.
 */

const CURRENT = join(ROOT, 'dist/src/main.js');
const SECRET = 'upgrade-test-secret-upgrade-test-secret-0123456789';
// A fresh clone builds each release once (npm ci and tsc): minutes, not seconds.
const BUILD_MS = 15 * 60_000;

interface Answer {
  status: number;
  type: string;
  body: string;
  json: Record<string, unknown> | undefined;
}

interface Instance {
  name: string;
  /** When its listener was up (Date.now()). */
  startedAt: number;
  child: Child;
  base: string;
}

/** What a release's settings table (at its commit) knows: the configuration the test writes for it uses only that. */
function featuresOf(commit: string): { apiKeys: boolean; storeUsers: boolean } {
  const table = execFileSync('git', ['-C', ROOT, 'show', `${commit}:src/config/defaults.ts`], { encoding: 'utf8' });
  return { apiKeys: table.includes("'apiKeys'"), storeUsers: table.includes("'users.store'") };
}

describe.each(recordedReleases().map((r) => [r.commit.slice(0, 7), r] as const))('upgrade from and rollback to %s', (_short, release: Release) => {
  const features = featuresOf(release.commit);
  let previous: string;
  let redis: TestRedis;
  let echo: EchoUpstream;
  let users: Users;
  let dir: string;
  let configFile: string;
  /** Every process started, stopped or not: all are killed after (a stopped one's kill is a no-op). */
  const started: Instance[] = [];

  beforeAll(async () => {
    previous = join(await builtRelease(release), 'dist/src/main.js');
    redis = await startRedis();
    echo = await echoUpstream();
    users = htpasswd({ alice: 'alice-pw', bob: 'bob-pw', carol: 'carol-pw', dave: 'dave-pw', gus: 'gus-pw' });
    dir = mkdtempSync(join(tmpdir(), 'gw-upgrade-'));
    configFile = join(dir, 'gateway.yaml');
    // The earlier release's file: only settings it knows. The current build must load it unchanged.
    writeFileSync(configFile, [
      'server: { host: 127.0.0.1, port: 0, acceptGraceMs: 0, shutdownGraceMs: 1000 }',
      'admin: false',
      'log: { level: info }',
      `store: { kind: redis, url: "${redis.url}", keyPrefix: "up:" }`,
      `users: { htpasswd: ${users.file}, watch: false${features.storeUsers ? ', store: true' : ''} }`,
      `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
      'lockout: { maxFailuresPerUser: 3, windowSeconds: 600 }',
      ...(features.apiKeys ? ['apiKeys: true'] : []),
      `upstreams: { up: { url: "${echo.url}" } }`,
      'routes:',
      '  - { path: /v1/x, upstream: up }',
      '  - { path: /v1/limited, upstream: up, rateLimit: { requests: 3, windowSeconds: 600 } }',
      // Groups come from the store (a release without store users would want an htgroup file).
      ...(features.storeUsers ? ['  - { path: /v1/ops, upstream: up, allow: { groups: [ops] } }'] : []),
    ].join('\n'));
  }, BUILD_MS);

  afterAll(async () => {
    await Promise.all(started.splice(0).map((i) => i.child.stop('SIGKILL')));
    await echo?.close();
    await redis?.destroy();
    users?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function start(name: 'previous' | 'current'): Promise<Instance> {
    const child = startNode(name === 'previous' ? previous : CURRENT, ['serve', '--config', configFile], {});
    const instance = { name, child, base: '', startedAt: 0 };
    started.push(instance);
    instance.base = `http://127.0.0.1:${await loggedPort(child)}`;
    instance.startedAt = Date.now();
    return instance;
  }

  async function stop(instance: Instance): Promise<void> {
    expect(await instance.child.stop('SIGTERM')).toBe(0);
  }

  function cli(main: string, args: string[], stdin = ''): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [main, ...args, '--config', configFile], { env: { PATH: process.env.PATH }, stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
      child.stdin.end(stdin);
    });
  }

  async function call(i: Instance, path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}): Promise<Answer> {
    const res = await fetch(`${i.base}${path}`, {
      method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
      headers: { ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const body = await res.text();
    const type = res.headers.get('content-type') ?? '';
    let json: Record<string, unknown> | undefined;
    try {
      json = type.includes('json') && body ? (JSON.parse(body) as Record<string, unknown>) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, type, body, json };
  }

  /** A refusal as every refusal of the gateway is written: the status, a problem body with a code; never a 5xx. */
  function refused(a: Answer, status: number): void {
    expect(a.status, a.body).toBe(status);
    expect(a.type).toContain('application/problem+json');
    expect(typeof a.json?.code).toBe('string');
  }

  const bearer = (i: Instance, token: string) => call(i, '/v1/x', { headers: { authorization: `Bearer ${token}` } });

  async function signIn(i: Instance, user: string, password: string): Promise<{ accessToken: string; refreshToken: string }> {
    const a = await call(i, '/v1/tokens/create', { body: { appKey: user, appSecret: password } });
    expect(a.status, a.body).toBe(200);
    return a.json as { accessToken: string; refreshToken: string };
  }

  async function refresh(i: Instance, refreshToken: string): Promise<Answer> {
    return call(i, '/v1/tokens/refresh', { body: { refreshToken } });
  }

  /** Each instance answers `status` to the bearer token. */
  async function everywhere(instances: Instance[], token: string, status: number): Promise<void> {
    for (const i of instances) {
      const a = await bearer(i, token);
      if (status === 200) expect(a.status, `${i.name}: ${a.body}`).toBe(200);
      else refused(a, status);
    }
  }

  // What the earlier release made before the upgrade, and what the current one made beside it.
  let old: Instance;
  let current: Instance;
  const made: Record<string, { accessToken: string; refreshToken: string }> = {};
  let oldKey: string | undefined;
  let currentKey: string | undefined;

  it('the configuration file the earlier release shipped passes the current build\'s config check, no problem and no change asked', () => {
    const shipped = join(dir, 'shipped');
    mkdirSync(shipped);
    for (const file of ['config/gateway.yaml', 'config/users.htpasswd']) {
      writeFileSync(join(shipped, file.slice('config/'.length)), execFileSync('git', ['-C', ROOT, 'show', `${release.commit}:${file}`]));
    }
    const r = spawnSync(process.execPath, [CURRENT, 'config', 'check', '--config', join(shipped, 'gateway.yaml')], {
      env: { PATH: process.env.PATH, GATEWAY_JWT_SECRET: SECRET }, encoding: 'utf8', timeout: 15_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('warning');
  });

  it('upgrade: the earlier release holds state; the current one starts beside it on its file and accepts all of it', async () => {
    old = await start('previous');
    made.alice = await signIn(old, 'alice', 'alice-pw');
    made.bob = await signIn(old, 'bob', 'bob-pw');
    made.carol = await signIn(old, 'carol', 'carol-pw');
    made.reuse = await signIn(old, 'alice', 'alice-pw');
    made.kept = await signIn(old, 'dave', 'dave-pw');
    await everywhere([old], made.alice.accessToken, 200);
    // A rate-limit bucket and a lockout, made on the earlier release.
    for (let n = 0; n < 3; n++) expect((await call(old, '/v1/limited', { headers: { authorization: basic('alice', 'alice-pw') } })).status).toBe(200);
    // maxFailuresPerUser wrong passwords: the pair is locked, the right password refused too.
    for (let n = 0; n < 3; n++) refused(await call(old, '/v1/tokens/create', { body: { appKey: 'bob', appSecret: 'wrong-password' } }), 401);
    refused(await call(old, '/v1/tokens/create', { body: { appKey: 'bob', appSecret: 'bob-pw' } }), 429);
    if (features.apiKeys) {
      const created = await cli(previous, ['keys', 'create', '--name', 'ci-bot', '--groups', 'bots']);
      expect(created.status, created.stderr).toBe(0);
      oldKey = /agk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}/.exec(created.stdout)?.[0];
      expect(oldKey).toBeDefined();
      expect((await call(old, '/v1/x', { headers: { 'x-api-key': oldKey! } })).status).toBe(200);
    }
    if (features.storeUsers) {
      const added = await cli(previous, ['users', 'add', 'erin', '--groups', 'ops', '--cost', '4'], 'erin-password\n');
      expect(added.status, added.stderr).toBe(0);
      expect((await call(old, '/v1/x', { headers: { authorization: basic('erin', 'erin-password') } })).status).toBe(200);
    }

    // The earlier release's file, unchanged: the current build's check passes it, then it serves from it.
    const checked = await cli(CURRENT, ['config', 'check']);
    expect(checked.status, checked.stderr).toBe(0);
    current = await start('current');
    const both = [old, current];
    await everywhere(both, made.alice.accessToken, 200);
    await everywhere(both, made.kept.accessToken, 200);
    // The bucket and the lockout hold on the current one too.
    refused(await call(current, '/v1/limited', { headers: { authorization: basic('alice', 'alice-pw') } }), 429);
    refused(await call(current, '/v1/tokens/create', { body: { appKey: 'bob', appSecret: 'bob-pw' } }), 429);
    if (oldKey) for (const i of both) expect((await call(i, '/v1/x', { headers: { 'x-api-key': oldKey } })).status).toBe(200);
    if (features.storeUsers) {
      for (const i of both) {
        expect((await call(i, '/v1/x', { headers: { authorization: basic('erin', 'erin-password') } })).status).toBe(200);
        // Her groups count in allow rules on both; a user without the group is refused.
        expect((await call(i, '/v1/ops', { headers: { authorization: basic('erin', 'erin-password') } })).status).toBe(200);
        refused(await call(i, '/v1/ops', { headers: { authorization: basic('alice', 'alice-pw') } }), 403);
      }
    }
  });

  it('upgrade: a lockout and a rate-limit bucket made by the current release hold on the earlier one', async () => {
    for (let n = 0; n < 3; n++) expect((await call(current, '/v1/limited', { headers: { authorization: basic('carol', 'carol-pw') } })).status).toBe(200);
    refused(await call(old, '/v1/limited', { headers: { authorization: basic('carol', 'carol-pw') } }), 429);
    for (let n = 0; n < 3; n++) refused(await call(current, '/v1/tokens/create', { body: { appKey: 'gus', appSecret: 'wrong-password' } }), 401);
    refused(await call(old, '/v1/tokens/create', { body: { appKey: 'gus', appSecret: 'gus-pw' } }), 429);
    refused(await call(current, '/v1/tokens/create', { body: { appKey: 'gus', appSecret: 'gus-pw' } }), 429);
    // Cleared by the earlier release's CLI: lifted on both.
    const cleared = await cli(previous, ['lockout', 'clear', '--user', 'gus', '--address', '127.0.0.1']);
    expect(cleared.status, cleared.stderr).toBe(0);
    for (const i of [old, current]) expect((await call(i, '/v1/tokens/create', { body: { appKey: 'gus', appSecret: 'gus-pw' } })).status).toBe(200);
  });

  it('upgrade: a pair refreshed on one release works on the other, and again the other way', async () => {
    const both = [old, current];
    const once = await refresh(current, made.alice.refreshToken);
    expect(once.status, once.body).toBe(200);
    const first = once.json as { accessToken: string; refreshToken: string };
    await everywhere(both, first.accessToken, 200);
    const twice = await refresh(old, first.refreshToken);
    expect(twice.status, twice.body).toBe(200);
    const second = twice.json as { accessToken: string; refreshToken: string };
    await everywhere(both, second.accessToken, 200);
    made.alice = second;
  });

  it('upgrade: a revocation on either release holds on both at once (a token, a reused family, a user\'s sessions)', async () => {
    const both = [old, current];
    // A token revoked on the current release, made on the earlier one.
    expect((await call(current, '/v1/tokens/revoke', { body: { token: made.carol.accessToken, type: 'ACCESS_TOKEN' } })).status).toBe(200);
    await everywhere(both, made.carol.accessToken, 401);
    refused(await refresh(old, made.carol.refreshToken), 401);
    // A pair of the current release: the earlier release understands it (then a revocation there holds on
    // both), or refuses it cleanly (a release before the session layout changed cannot read the session;
    // see releases.json's notes), and a revocation on the current one holds on both.
    const fresh = await signIn(current, 'carol', 'carol-pw');
    await everywhere([current], fresh.accessToken, 200);
    const understood = (await bearer(old, fresh.accessToken)).status === 200;
    if (!understood) refused(await bearer(old, fresh.accessToken), 401);
    expect((await call(understood ? old : current, '/v1/tokens/revoke', { body: { token: fresh.refreshToken, type: 'REFRESH_TOKEN' } })).status).toBe(200);
    await everywhere(both, fresh.accessToken, 401);
    if (release.sameSessions) expect(understood).toBe(true);
    // Reuse: the family's first refresh token presented again after its successor was used, across releases.
    const next = await refresh(old, made.reuse.refreshToken);
    expect(next.status, next.body).toBe(200);
    const successor = next.json as { accessToken: string; refreshToken: string };
    expect((await refresh(current, successor.refreshToken)).status).toBe(200);
    refused(await refresh(current, made.reuse.refreshToken), 401);
    await everywhere(both, successor.accessToken, 401);
    // A user's sessions ended by the earlier release's CLI, then by the current one's.
    const bobs = [made.bob, await signIn(current, 'dave', 'dave-pw')];
    const ended = await cli(previous, ['sessions', 'revoke', '--user', 'bob']);
    expect(ended.status, ended.stderr).toBe(0);
    await everywhere(both, bobs[0]!.accessToken, 401);
    const daves = await signIn(old, 'dave', 'dave-pw');
    const endedNow = await cli(CURRENT, ['sessions', 'revoke', '--user', 'dave']);
    expect(endedNow.status, endedNow.stderr).toBe(0);
    await everywhere(both, bobs[1]!.accessToken, 401);
    await everywhere(both, daves.accessToken, 401);
    await everywhere(both, made.kept.accessToken, 401);
    made.kept = await signIn(old, 'dave', 'dave-pw');
  });

  it('upgrade: a revocation made on the earlier release holds on the current one, for sessions either release made (a token, a user\'s sessions, a reused family)', async () => {
    const both = [old, current];
    // A pair of each release, revoked on the earlier one by its access token: the way every release can
    // name a session of the other (a release before the session layout changed cannot read the refresh
    // token of a session the current one made, whose id is longer; it answers 200 and ends nothing, as
    // for any token it does not know: see CHANGELOG, Upgrading).
    const byAccess = [await signIn(old, 'carol', 'carol-pw'), await signIn(current, 'carol', 'carol-pw')];
    for (const pair of byAccess) await everywhere([current, ...(release.sameSessions ? [old] : [])], pair.accessToken, 200);
    for (const pair of byAccess) {
      expect((await call(old, '/v1/tokens/revoke', { body: { token: pair.accessToken, type: 'ACCESS_TOKEN' } })).status).toBe(200);
      await everywhere(both, pair.accessToken, 401);
      refused(await refresh(current, pair.refreshToken), 401);
    }
    // By its refresh token, a pair the earlier release can read (its own; the current one's too when it reads them).
    const byRefresh = [await signIn(old, 'carol', 'carol-pw'), ...(release.sameSessions ? [await signIn(current, 'carol', 'carol-pw')] : [])];
    for (const pair of byRefresh) {
      expect((await call(old, '/v1/tokens/revoke', { body: { token: pair.refreshToken, type: 'REFRESH_TOKEN' } })).status).toBe(200);
      await everywhere(both, pair.accessToken, 401);
      refused(await refresh(current, pair.refreshToken), 401);
    }

    // A user's sessions, made by both releases, ended by the earlier release's CLI: none is left on either.
    const gus = [await signIn(old, 'gus', 'gus-pw'), await signIn(current, 'gus', 'gus-pw'), await signIn(current, 'gus', 'gus-pw')];
    await everywhere([current], gus[1]!.accessToken, 200);
    const ended = await cli(previous, ['sessions', 'revoke', '--user', 'gus']);
    expect(ended.status, ended.stderr).toBe(0);
    for (const pair of gus) {
      await everywhere(both, pair.accessToken, 401);
      refused(await refresh(current, pair.refreshToken), 401);
    }
    // The current release's listing agrees.
    const listed = await cli(CURRENT, ['sessions', 'list', '--user', 'gus']);
    expect(listed.status, listed.stderr).toBe(0);
    expect(listed.stdout).toContain('no live sessions');

    // Reuse seen by the earlier release: a family's first token presented there after its successor's
    // successor was used on the current one ends the family on both.
    const families = [await signIn(old, 'alice', 'alice-pw'), ...(release.sameSessions ? [await signIn(current, 'alice', 'alice-pw')] : [])];
    for (const family of families) {
      const first = await refresh(current, family.refreshToken);
      expect(first.status, first.body).toBe(200);
      const second = await refresh(current, (first.json as { refreshToken: string }).refreshToken);
      expect(second.status, second.body).toBe(200);
      const latest = second.json as { accessToken: string; refreshToken: string };
      refused(await refresh(old, family.refreshToken), 401);
      await everywhere(both, latest.accessToken, 401);
      refused(await refresh(current, latest.refreshToken), 401);
    }
  });

  // Only releases that had them (no test is skipped: one a release cannot run is not declared for it).
  if (features.apiKeys) it('upgrade: API keys made by either release hold on both; a revocation on either holds on both at once', async () => {
    const both = [old, current];
    const created = await cli(CURRENT, ['keys', 'create', '--name', 'deploy-bot']);
    expect(created.status, created.stderr).toBe(0);
    currentKey = /agk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}/.exec(created.stdout)?.[0];
    for (const i of both) expect((await call(i, '/v1/x', { headers: { 'x-api-key': currentKey! } })).status).toBe(200);
    const another = await cli(previous, ['keys', 'create', '--name', 'gone-bot']);
    const gone = /agk_([0-9a-f]{16})_[A-Za-z0-9_-]{43}/.exec(another.stdout)!;
    for (const i of both) expect((await call(i, '/v1/x', { headers: { 'x-api-key': gone[0] } })).status).toBe(200);
    const revoked = await cli(CURRENT, ['keys', 'revoke', gone[1]!]);
    expect(revoked.status, revoked.stderr).toBe(0);
    for (const i of both) refused(await call(i, '/v1/x', { headers: { 'x-api-key': gone[0] } }), 401);
    // And the other way: a key of the current release revoked by the earlier release's CLI.
    const ours = /agk_([0-9a-f]{16})_[A-Za-z0-9_-]{43}/.exec((await cli(CURRENT, ['keys', 'create', '--name', 'short-bot'])).stdout)!;
    for (const i of both) expect((await call(i, '/v1/x', { headers: { 'x-api-key': ours[0] } })).status).toBe(200);
    const revokedThere = await cli(previous, ['keys', 'revoke', ours[1]!]);
    expect(revokedThere.status, revokedThere.stderr).toBe(0);
    for (const i of both) refused(await call(i, '/v1/x', { headers: { 'x-api-key': ours[0] } }), 401);
  });

  if (features.storeUsers) it('upgrade: users of the store made by either release sign in on both, with their groups; a removal holds on both at once', async () => {
    const both = [old, current];
    const added = await cli(CURRENT, ['users', 'add', 'fay', '--cost', '4'], 'fay-password\n');
    expect(added.status, added.stderr).toBe(0);
    for (const i of both) expect((await call(i, '/v1/x', { headers: { authorization: basic('fay', 'fay-password') } })).status).toBe(200);
    const removed = await cli(previous, ['users', 'remove', 'fay']);
    expect(removed.status, removed.stderr).toBe(0);
    for (const i of both) refused(await call(i, '/v1/x', { headers: { authorization: basic('fay', 'fay-password') } }), 401);
    expect((await cli(CURRENT, ['users', 'add', 'hal', '--groups', 'ops', '--cost', '4'], 'hal-password\n')).status).toBe(0);
    for (const i of both) expect((await call(i, '/v1/ops', { headers: { authorization: basic('hal', 'hal-password') } })).status).toBe(200);
    // Groups changed by the earlier release's CLI: both judge by the new ones.
    expect((await cli(previous, ['users', 'groups', 'hal', '--set', 'dev'])).status).toBe(0);
    for (const i of both) refused(await call(i, '/v1/ops', { headers: { authorization: basic('hal', 'hal-password') } }), 403);
    // A password changed by the current one: the old one is refused on both.
    expect((await cli(CURRENT, ['users', 'passwd', 'hal', '--cost', '4'], 'hal-new-password\n')).status).toBe(0);
    for (const i of both) refused(await call(i, '/v1/x', { headers: { authorization: basic('hal', 'hal-password') } }), 401);
    for (const i of both) expect((await call(i, '/v1/x', { headers: { authorization: basic('hal', 'hal-new-password') } })).status).toBe(200);
    const listed = await cli(CURRENT, ['users', 'list']);
    expect(listed.stdout).toMatch(/erin\s+ops/);
  });

  it('upgrade done: the earlier release stops; the current one serves everything made before', async () => {
    made.current = await signIn(current, 'alice', 'alice-pw');
    await stop(old);
    await everywhere([current], made.alice.accessToken, 200);
    await everywhere([current], made.kept.accessToken, 200);
    const r = await refresh(current, made.kept.refreshToken);
    expect(r.status, r.body).toBe(200);
    made.kept = r.json as { accessToken: string; refreshToken: string };
  });

  it('rollback: the current release stops, the earlier one starts again: what came before works; what the current one made works or is refused cleanly', async () => {
    await stop(current);
    old = await start('previous');
    // Made before the upgrade (and refreshed since): still works, and refreshes on the earlier release.
    await everywhere([old], made.kept.accessToken, 200);
    const r = await refresh(old, made.kept.refreshToken);
    expect(r.status, r.body).toBe(200);
    await everywhere([old], (r.json as { accessToken: string }).accessToken, 200);
    // Made by the current release: understood, or refused cleanly, and the earlier release keeps serving.
    for (const answer of [await bearer(old, made.current.accessToken), await refresh(old, made.current.refreshToken)]) {
      if (answer.status !== 200) refused(answer, 401);
    }
    if (currentKey) {
      const a = await call(old, '/v1/x', { headers: { 'x-api-key': currentKey } });
      if (a.status !== 200) refused(a, 401);
    }
    if (oldKey) expect((await call(old, '/v1/x', { headers: { 'x-api-key': oldKey } })).status).toBe(200);
    if (features.storeUsers) {
      // Release 5318de5 reads its store users only at its first re-read, 5 s after a start (fixed since):
      // a 401 before is its known defect. At most two tries, under the lockout's three failures.
      const erin = () => call(old, '/v1/x', { headers: { authorization: basic('erin', 'erin-password') } });
      let a = await erin();
      if (a.status !== 200) {
        refused(a, 401);
        await new Promise((r) => setTimeout(r, Math.max(0, old.startedAt + 5500 - Date.now())));
        a = await erin();
      }
      expect(a.status, a.body).toBe(200);
      // Added by the current release: the same entry, read by the earlier one.
      expect((await call(old, '/v1/x', { headers: { authorization: basic('hal', 'hal-new-password') } })).status).toBe(200);
    }
    // Signing in again on the earlier release works, and it is still up.
    await everywhere([old], (await signIn(old, 'alice', 'alice-pw')).accessToken, 200);
    expect(old.child.proc.exitCode).toBeNull();
  });
  // Each step starts processes and runs CLIs of two builds: generous on a busy host.
}, 90_000);
