import { createHash, createPublicKey } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoUpstream, htpasswd, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { httpsCall, signingKey, TestCa, TestProvider } from '../support/oidc-provider.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

/**
 * Several providers at once (login.providers) beside the gateway's own users (login.local): the
 * sign-in page offers each, every sign-in's state names its provider, a response from another issuer
 * is refused (a mix-up), and sign-out lands on login.postLogoutRedirectUri through the provider's
 * end-session page. Two real providers (node-oidc-provider), two gateway instances on one Redis,
 * headless Chromium.
 */

const STEP_MS = 30_000;
const ARTIFACTS = join(process.cwd(), 'test-artifacts', 'sign-in');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let ca: TestCa;
let corp: TestProvider;
let partner: TestProvider;
let redis: TestRedis;
let users: Users;
let echo: EchoUpstream;
let a: RunningGateway;
let b: RunningGateway;
let browser: Browser;
let profile: string;

function gatewayConfig(): Record<string, unknown> {
  const issuer = (name: string, p: TestProvider) => ({ name, issuer: p.issuer, audiences: ['gateway-api'], userClaim: 'preferred_username', caFile: ca.caFile });
  return {
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 500, tls: { certFile: ca.certFile, keyFile: ca.keyFile } },
    // Chromium shares the cores with the suite; this file is not about outages, so a slow command is no 503.
    store: { kind: 'redis', url: redis.url, commandTimeoutMs: 3000 },
    identity: { issuers: [issuer('corp', corp), issuer('partner', partner)] },
    login: {
      local: true,
      providers: [
        { issuer: 'corp', clientId: 'gateway', clientSecret: 'corp-secret', scopes: ['openid', 'profile'], label: 'Corp SSO' },
        { issuer: 'partner', clientId: 'gateway', clientSecret: 'partner-secret', scopes: ['openid', 'profile'], label: 'Partner' },
      ],
      page: { title: 'Example Corp' },
    },
    upstreams: { app: { url: echo.url } },
    routes: [{ path: '/app', upstream: 'app', login: true }],
  };
}

function client(secret: string): Record<string, unknown> {
  return {
    client_id: 'gateway',
    client_secret: secret,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    redirect_uris: [`${a.base}/auth/callback`, `${b.base}/auth/callback`],
    post_logout_redirect_uris: [`${a.base}/auth/sign-in`],
    backchannel_logout_uri: `${a.base}/auth/backchannel-logout`,
    backchannel_logout_session_required: true,
  };
}

beforeAll(async () => {
  ca = new TestCa();
  [corp, partner, redis, echo] = await Promise.all([
    TestProvider.start(ca, { keys: [signingKey('rsa')], resources: {}, clients: [], accounts: { alice: { preferred_username: 'alice' } } }),
    TestProvider.start(ca, { keys: [signingKey('rsa')], resources: {}, clients: [], accounts: { pat: { preferred_username: 'pat' } } }),
    startRedis(),
    echoUpstream(),
  ]);
  users = htpasswd({ bob: 'bob-password' });
  [a, b] = await Promise.all([startGateway(testConfig(users.file, gatewayConfig())), startGateway(testConfig(users.file, gatewayConfig()))]);
  await Promise.all([corp.restart({ clients: [client('corp-secret')] }), partner.restart({ clients: [client('partner-secret')] })]);
  const spki = createHash('sha256').update(createPublicKey(readFileSync(ca.certFile)).export({ type: 'spki', format: 'der' })).digest('base64');
  profile = mkdtempSync(join(tmpdir(), 'gw-chromium-'));
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    protocolTimeout: STEP_MS,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', `--user-data-dir=${profile}`, `--ignore-certificate-errors-spki-list=${spki}`],
  });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all([a?.close(), b?.close()]);
  await echo?.close();
  await Promise.all([corp?.close(), partner?.close()]);
  await redis?.destroy();
  users?.remove();
  ca?.remove();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

async function freshPage(): Promise<Page> {
  return (await browser.createBrowserContext()).newPage();
}

/** Fills a provider's development login form (and its consent) until the browser is back at `base`. */
async function signInAtProvider(page: Page, base: string, login: string): Promise<void> {
  for (let i = 0; i < 4 && !page.url().startsWith(base); i++) {
    await page.waitForSelector('form button[type=submit]', { timeout: STEP_MS });
    if (await page.$('input[name=login]')) {
      await page.type('input[name=login]', login);
      await page.type('input[name=password]', 'any-password');
    }
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form button[type=submit]')]);
  }
}

async function checkPage(page: Page, name: string): Promise<void> {
  await page.evaluate(AXE);
  const results = await page.evaluate(() => (globalThis as unknown as { axe: { run(o: unknown): Promise<{ violations: Array<{ id: string; impact: string; help: string }> }> } })
    .axe.run({ runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } }));
  expect(results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help}`), name).toEqual([]);
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
}

async function bodyText(page: Page): Promise<string> {
  return page.evaluate(() => (globalThis as unknown as { document: { body: { innerText: string } } }).document.body.innerText);
}

describe('several providers and the gateway\'s own users', () => {
  it('the sign-in page offers each provider and the form; a provider\'s button signs in there and comes back', async () => {
    const page = await freshPage();
    await page.goto(`${a.base}/app/choose?x=1`, { timeout: STEP_MS });
    expect(page.url()).toBe(`${a.base}/auth/sign-in?rd=%2Fapp%2Fchoose%3Fx%3D1`);
    expect(await page.$$eval('form.provider button', (buttons) => buttons.map((button) => (button as unknown as { innerText: string }).innerText))).toEqual(['Sign in with Corp SSO', 'Sign in with Partner']);
    expect(await page.$('form.local')).not.toBeNull();
    expect(await bodyText(page)).toContain('or with your user name and password');
    await checkPage(page, 'sign-in-chooser');
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form.provider:nth-of-type(2) button')]);
    expect(page.url().startsWith(partner.issuer)).toBe(true);
    await signInAtProvider(page, a.base, 'pat');
    expect(page.url()).toBe(`${a.base}/app/choose?x=1`);
    expect(JSON.parse(await bodyText(page)).headers['x-authenticated-user']).toBe('pat');
    await page.goto(`${a.base}/auth/me`, { timeout: STEP_MS });
    expect(await bodyText(page)).toContain('Partner');
    // Back-channel logout works for the second provider too (its logout token checked with its keys):
    // signing out at the partner itself ends the gateway session on both instances.
    const cookie = (await page.browserContext().cookies()).find((c) => c.name === '__Host-gateway')!.value;
    await page.goto(`${partner.issuer}/session/end?client_id=gateway`, { timeout: STEP_MS });
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('button[name=logout][value=yes]')]);
    expect((await partner.backchannelLogouts())).toEqual({ ok: 1, error: [] });
    const [onA, onB] = await Promise.all([
      httpsCall(`${a.base}/app/x`, ca.caFile, { method: 'GET', headers: { cookie: `__Host-gateway=${cookie}` } }),
      httpsCall(`${b.base}/app/x`, ca.caFile, { method: 'GET', headers: { cookie: `__Host-gateway=${cookie}` } }),
    ]);
    expect([onA.status, onB.status]).toEqual([401, 401]);
    await page.browserContext().close();
  }, 120_000);

  it('refuses a mix-up: the callback of a sign-in begun at one provider answered by the other (RFC 9207 iss), before any token request', async () => {
    const before = (await a.gateway.store.listSessions('pat')).length;
    const page = await freshPage();
    await page.goto(`${a.base}/auth/sign-in?rd=%2Fapp%2Fmixup`, { timeout: STEP_MS });
    const start = page.waitForResponse((r) => r.url().startsWith(`${a.base}/auth/callback?`), { timeout: STEP_MS });
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form.provider:nth-of-type(1) button')]);
    // The gateway's 302 to corp's authorization endpoint: this sign-in's parameters.
    const atCorp = new URL((await start).headers().location!);
    expect(atCorp.origin).toBe(corp.issuer);
    // The same sign-in's parameters (its state, nonce, PKCE challenge) sent to the other provider instead.
    const atPartner = new URL(`${partner.issuer}/auth`);
    for (const [k, v] of atCorp.searchParams) atPartner.searchParams.set(k, v);
    const callback = page.waitForResponse((r) => r.url().startsWith(`${a.base}/auth/callback?`), { timeout: STEP_MS });
    await page.goto(atPartner.href, { timeout: STEP_MS });
    await signInAtProvider(page, a.base, 'pat');
    const answer = await callback;
    const back = new URL(answer.url());
    expect(back.searchParams.get('iss')).toBe(partner.issuer);
    expect(back.searchParams.get('state')).toBe(atCorp.searchParams.get('state'));
    expect(answer.status()).toBe(400);
    expect(JSON.parse(await answer.text())).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('mix-up') });
    expect((await page.browserContext().cookies()).some((c) => c.name === '__Host-gateway')).toBe(false);
    expect(await a.gateway.store.listSessions('pat')).toHaveLength(before);
    await page.browserContext().close();
  }, 120_000);

  it('sign-out goes through the provider of the session, which honours post_logout_redirect_uri: the browser lands on the sign-in page', async () => {
    const page = await freshPage();
    await page.goto(`${a.base}/auth/sign-in?rd=%2Fapp%2Fcorp`, { timeout: STEP_MS });
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form.provider:nth-of-type(1) button')]);
    await signInAtProvider(page, a.base, 'alice');
    expect(page.url()).toBe(`${a.base}/app/corp`);
    const cookie = (await page.browserContext().cookies()).find((c) => c.name === '__Host-gateway')!.value;
    await page.goto(`${a.base}/auth/logout`, { timeout: STEP_MS });
    await checkPage(page, 'sign-out-provider');
    const logout = page.waitForResponse((r) => r.url() === `${a.base}/auth/logout` && r.request().method() === 'POST', { timeout: STEP_MS });
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form button[type=submit]')]);
    const location = new URL((await logout).headers().location!);
    expect(`${location.origin}${location.pathname}`).toBe(`${corp.issuer}/session/end`);
    expect(location.searchParams.get('post_logout_redirect_uri')).toBe(`${a.base}/auth/sign-in`);
    const [onA, onB] = await Promise.all([
      httpsCall(`${a.base}/app/x`, ca.caFile, { method: 'GET', headers: { cookie: `__Host-gateway=${cookie}` } }),
      httpsCall(`${b.base}/app/x`, ca.caFile, { method: 'GET', headers: { cookie: `__Host-gateway=${cookie}` } }),
    ]);
    expect([onA.status, onB.status]).toEqual([401, 401]);
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('button[name=logout][value=yes]')]);
    for (let i = 0; i < 100 && !page.url().startsWith(a.base); i++) await new Promise((r) => setTimeout(r, 50));
    expect(page.url()).toBe(`${a.base}/auth/sign-in?state=${location.searchParams.get('state')}`);
    expect(await page.$('form.local')).not.toBeNull();
    // The provider's back-channel logout reached the gateway and was taken (nothing left to end).
    expect((await corp.backchannelLogouts()).error).toEqual([]);
    await page.browserContext().close();
  }, 120_000);
});
