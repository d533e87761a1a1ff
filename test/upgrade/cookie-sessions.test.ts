import { createHash, createPublicKey } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoUpstream, htpasswd, type EchoUpstream, type Users } from '../support/fixtures.js';
import { httpsCall, signingKey, TestCa, TestProvider } from '../support/oidc-provider.js';
import { loggedPort, startNode, type Child } from '../support/process.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { builtRelease, recordedReleases, ROOT, type Release } from './releases.js';

/**
 * Cookie sessions of browser sign-in across an upgrade and a rollback: a recorded release that has
 * browser sign-in (`login`) and the current build, both on HTTPS on one Redis, signing in at a real
 * OpenID provider in a real browser (as test/integration/oidc-login.test.ts does). A session cookie
 * made by either release is accepted by the other while both run, and after the earlier one stops or
 * comes back.
 */

const CURRENT = join(ROOT, 'dist/src/main.js');
const SECRET = 'upgrade-test-secret-upgrade-test-secret-0123456789';
const CLIENT_SECRET = 'gateway-client-secret';
const BUILD_MS = 15 * 60_000;
const STEP_MS = 30_000;

function hasLogin(commit: string): boolean {
  return execFileSync('git', ['-C', ROOT, 'show', `${commit}:src/config/defaults.ts`], { encoding: 'utf8' }).includes("'login.clientId'");
}

const withLogin = recordedReleases().filter((r) => hasLogin(r.commit));

describe.each(withLogin.map((r) => [r.commit.slice(0, 7), r] as const))('browser sign-in sessions across an upgrade from %s and back', (_short, release: Release) => {
  let previous: string;
  let ca: TestCa;
  let provider: TestProvider;
  let redis: TestRedis;
  let echo: EchoUpstream;
  let users: Users;
  let dir: string;
  let configFile: string;
  let browser: Browser;
  const running = new Map<string, Child>();
  /** Every process started, stopped or not: all are killed after (a stopped one's kill is a no-op). */
  const started: Child[] = [];

  beforeAll(async () => {
    previous = join(await builtRelease(release), 'dist/src/main.js');
    ca = new TestCa();
    [provider, redis, echo] = await Promise.all([
      TestProvider.start(ca, { keys: [signingKey('rsa')], resources: {}, clients: [], accounts: { alice: { preferred_username: 'alice', groups: ['staff'] } } }),
      startRedis(),
      echoUpstream(),
    ]);
    users = htpasswd({ bob: 'bob-password' });
    dir = mkdtempSync(join(tmpdir(), 'gw-upgrade-login-'));
    configFile = join(dir, 'gateway.yaml');
    writeFileSync(configFile, [
      `server: { host: 127.0.0.1, port: 0, acceptGraceMs: 0, shutdownGraceMs: 1000, tls: { certFile: ${ca.certFile}, keyFile: ${ca.keyFile} } }`,
      'admin: false',
      'log: { level: info }',
      // Chromium shares the cores with the suite: a slow command is no 503 here (both releases know the key).
      `store: { kind: redis, url: "${redis.url}", keyPrefix: "up:", commandTimeoutMs: 3000 }`,
      `users: { htpasswd: ${users.file}, watch: false }`,
      `tokens: { signing: { alg: HS256, secret: "${SECRET}" } }`,
      'identity:',
      `  issuers: [{ name: corp, issuer: "${provider.issuer}", audiences: [gateway-api], userClaim: preferred_username, groupsClaim: groups, caFile: ${ca.caFile} }]`,
      `login: { issuer: corp, clientId: gateway, clientSecret: ${CLIENT_SECRET}, scopes: [openid, profile, groups] }`,
      `upstreams: { app: { url: "${echo.url}" } }`,
      'routes: [{ path: /app, upstream: app, login: true }]',
    ].join('\n'));
    const spki = createHash('sha256').update(createPublicKey(readFileSync(ca.certFile)).export({ type: 'spki', format: 'der' })).digest('base64');
    browser = await puppeteer.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      protocolTimeout: STEP_MS,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', `--user-data-dir=${join(dir, 'chromium')}`, `--ignore-certificate-errors-spki-list=${spki}`],
    });
  }, BUILD_MS);

  afterAll(async () => {
    await browser?.close();
    await Promise.all(started.splice(0).map((c) => c.stop('SIGKILL')));
    await echo?.close();
    await provider?.close();
    await redis?.destroy();
    users?.remove();
    ca?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Starts a release's instance; the provider is told its callback (same issuer, same port). */
  async function start(name: 'previous' | 'current'): Promise<string> {
    const child = startNode(name === 'previous' ? previous : CURRENT, ['serve', '--config', configFile], {});
    running.set(name, child);
    started.push(child);
    const base = `https://127.0.0.1:${await loggedPort(child)}`;
    bases.set(name, base);
    await provider.restart({
      clients: [{
        client_id: 'gateway', client_secret: CLIENT_SECRET, grant_types: ['authorization_code'], response_types: ['code'],
        redirect_uris: [...bases.values()].map((b) => `${b}/auth/callback`),
      }],
    });
    return base;
  }
  const bases = new Map<string, string>();

  async function stop(name: 'previous' | 'current'): Promise<void> {
    const child = running.get(name)!;
    running.delete(name);
    expect(await child.stop('SIGTERM')).toBe(0);
  }

  /** Signs alice in through the browser at `base`; answers the session cookie (`name=value`). */
  async function signIn(base: string): Promise<string> {
    const context = await browser.createBrowserContext();
    try {
      const page = await context.newPage();
      await page.goto(`${base}/app/hello`, { timeout: STEP_MS });
      for (let i = 0; i < 4 && !page.url().startsWith(base); i++) {
        await page.waitForSelector('form button[type=submit]', { timeout: STEP_MS });
        if (await page.$('input[name=login]')) {
          await page.type('input[name=login]', 'alice');
          await page.type('input[name=password]', 'any-password');
        }
        await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form button[type=submit]')]);
      }
      expect(page.url().startsWith(base), `stuck at ${page.url()}:\n${provider.log()}`).toBe(true);
      const cookie = (await context.cookies()).find((c) => c.name === '__Host-gateway');
      expect(cookie).toBeDefined();
      return `${cookie!.name}=${cookie!.value}`;
    } finally {
      await context.close();
    }
  }

  async function get(base: string, cookie: string): Promise<{ status: number; body: string; type: string }> {
    const a = await httpsCall(`${base}/app/hello`, ca.caFile, { method: 'GET', headers: { cookie, accept: 'application/json' } });
    return { status: a.status, body: a.body, type: String(a.headers['content-type'] ?? '') };
  }

  it('a cookie session made by either release is accepted by both while they run, after the upgrade and after a rollback; a sign-out on either ends it on both', async () => {
    const old = await start('previous');
    const before = await signIn(old);
    expect((await get(old, before)).status).toBe(200);
    const current = await start('current');
    for (const base of [old, current]) expect((await get(base, before)).status, base).toBe(200);
    const made = await signIn(current);
    for (const base of [old, current]) expect((await get(base, made)).status, base).toBe(200);
    // Signed out on the earlier release: refused on both, with the usual problem body.
    const ended = await signIn(current);
    const out = await httpsCall(`${old}/auth/logout`, ca.caFile, { method: 'POST', headers: { cookie: ended } });
    expect(out.status).toBeLessThan(400);
    for (const base of [old, current]) {
      const a = await get(base, ended);
      expect(a.status, a.body).toBe(401);
      expect(a.type).toContain('application/problem+json');
    }
    await stop('previous');
    bases.delete('previous');
    expect((await get(current, before)).status).toBe(200);
    // Rollback.
    await stop('current');
    bases.delete('current');
    const back = await start('previous');
    for (const cookie of [before, made]) expect((await get(back, cookie)).status).toBe(200);
  });
}, 120_000);
