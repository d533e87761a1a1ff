import { createHash, createPublicKey } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSync } from '../../src/credentials/bcrypt.js';
import { echoUpstream, htpasswd, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { httpsCall, TestCa } from '../support/oidc-provider.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { startSlapd, type TestSlapd } from '../support/slapd.js';

/**
 * The sign-in page of the gateway's own users (login.local) in a real browser (Debian's chromium,
 * headless, puppeteer-core): users of the users file, of the store and of a real slapd; two gateway
 * instances on HTTPS sharing one Redis. Each page is checked with axe-core and kept as a screenshot
 * under test-artifacts/.
 */

const STEP_MS = 30_000;
const ARTIFACTS = join(process.cwd(), 'test-artifacts', 'sign-in');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let ca: TestCa;
let redis: TestRedis;
let slapd: TestSlapd;
let users: Users;
let echo: EchoUpstream;
let echoHandler: EchoUpstream['handler'];
let a: RunningGateway;
let b: RunningGateway;
let browser: Browser;
let profile: string;

function gatewayConfig(): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 500, tls: { certFile: ca.certFile, keyFile: ca.keyFile } },
    // Chromium shares the cores with the suite; this file is not about outages, so a slow command is no 503.
    store: { kind: 'redis', url: redis.url, commandTimeoutMs: 3000 },
    users: {
      htpasswd: users.file, watch: false, store: true,
      ldap: { url: slapd.url, userDn: `uid={user},ou=people,${slapd.baseDn}` },
    },
    lockout: { maxFailuresPerUser: 3, maxFailuresPerAccount: 50, windowSeconds: 600 },
    login: { local: true, page: { title: 'Example Corp' } },
    upstreams: { app: { url: echo.url } },
    routes: [
      { path: '/app', upstream: 'app', login: true },
      { path: '/api', upstream: 'app' },
    ],
  };
}

beforeAll(async () => {
  ca = new TestCa();
  [redis, echo, slapd] = await Promise.all([startRedis(), echoUpstream(), startSlapd([{ uid: 'dave', password: 'dave-password' }])]);
  echoHandler = echo.handler;
  users = htpasswd({ bob: 'bob-password', eve: 'eve-password', frank: 'frank-password' });
  [a, b] = await Promise.all([startGateway(testConfig(users.file, gatewayConfig())), startGateway(testConfig(users.file, gatewayConfig()))]);
  // Ready: the store's connection is up (readyz answers 200).
  for (const gw of [a, b]) {
    for (let i = 0; i < 200 && (await get(gw.base, '/readyz').catch(() => ({ status: 0 }))).status !== 200; i++) await new Promise((r) => setTimeout(r, 50));
  }
  expect(await a.gateway.storeUsers!.add('carol', hashSync('carol-password', { cost: 4 }), [])).toBe(true);
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
  await slapd?.destroy();
  await redis?.destroy();
  users?.remove();
  ca?.remove();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** A page in a browser context of its own (its own cookies). */
async function freshPage(): Promise<Page> {
  const context = await browser.createBrowserContext();
  return context.newPage();
}

/** Types the user name and password into the form and posts it, waiting for the answer page. */
async function submit(page: Page, user: string, password: string): Promise<void> {
  await page.waitForSelector('form.local', { timeout: STEP_MS });
  await page.$eval('#username', (el) => ((el as unknown as { value: string }).value = ''));
  await page.type('#username', user);
  await page.type('#password', password);
  await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form.local button[type=submit]')]);
}

async function bodyText(page: Page): Promise<string> {
  return page.evaluate(() => (globalThis as unknown as { document: { body: { innerText: string } } }).document.body.innerText);
}

/** axe-core run in the page: no serious or critical violation; and the page's screenshot kept. */
async function checkPage(page: Page, name: string): Promise<void> {
  await page.evaluate(AXE);
  const results = await page.evaluate(() => (globalThis as unknown as { axe: { run(o: unknown): Promise<{ violations: Array<{ id: string; impact: string; help: string }> }> } })
    .axe.run({ runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } }));
  const serious = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(serious.map((v) => `${v.id}: ${v.help}`), name).toEqual([]);
  // The stylesheet is served and allowed by the page's Content-Security-Policy.
  const background = await page.evaluate(() => {
    const g = globalThis as unknown as { document: { querySelector(s: string): unknown }; getComputedStyle(e: unknown): { backgroundColor: string } };
    return g.getComputedStyle(g.document.querySelector('main')).backgroundColor;
  });
  expect(background, name).toBe('rgb(255, 255, 255)');
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
}

function get(base: string, path: string, headers: Record<string, string> = {}) {
  return httpsCall(`${base}${path}`, ca.caFile, { method: 'GET', headers });
}

describe('the sign-in page of the gateway\'s own users (login.local)', () => {
  it('sends a browser without credentials on a login route to the page; API clients keep 401 with WWW-Authenticate', async () => {
    const nav = await get(a.base, '/app/hello?x=1', { accept: 'text/html,application/xhtml+xml' });
    expect(nav.status).toBe(302);
    expect(nav.headers.location).toBe('/auth/sign-in?rd=%2Fapp%2Fhello%3Fx%3D1');
    const api = await get(a.base, '/app/hello', { accept: 'application/json' });
    expect(api.status).toBe(401);
    expect(api.headers['www-authenticate']).toContain('Basic');
    const page = await get(a.base, '/auth/sign-in?rd=%2Fapp%2Fhello');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain('default-src \'none\'');
    expect(csp).toContain('form-action \'self\'');
    expect(csp).toContain('frame-ancestors \'none\'');
    expect(csp).not.toContain('script-src');
    expect(page.body).not.toMatch(/<script/i);
    expect(page.body).toContain('Example Corp');
    expect(String(page.headers['set-cookie'])).toMatch(/^__Host-gateway-form=[A-Za-z0-9_-]{24}; Path=\/; Secure; HttpOnly; SameSite=Lax; Max-Age=3600$/);
  });

  it('signs in a users-file user with JavaScript on and comes back to the page; the session is the store\'s, on both instances', async () => {
    const page = await freshPage();
    await page.goto(`${a.base}/app/hello?x=1`, { timeout: STEP_MS });
    expect(page.url()).toBe(`${a.base}/auth/sign-in?rd=%2Fapp%2Fhello%3Fx%3D1`);
    await checkPage(page, 'sign-in');
    await submit(page, 'bob', 'bob-password');
    expect(page.url()).toBe(`${a.base}/app/hello?x=1`);
    const seen = JSON.parse(await bodyText(page)) as { headers: Record<string, string> };
    expect(seen.headers['x-authenticated-user']).toBe('bob');
    expect(seen.headers.cookie ?? '').not.toContain('__Host-gateway');
    expect(await a.gateway.store.listSessions('bob')).toHaveLength(1);
    // The same cookie on the other instance (one Redis).
    const cookie = (await page.browserContext().cookies()).find((c) => c.name === '__Host-gateway')!;
    expect(cookie).toMatchObject({ secure: true, httpOnly: true, sameSite: 'Lax', path: '/' });
    const other = await get(b.base, '/app/there', { cookie: `__Host-gateway=${cookie.value}` });
    expect(other.status).toBe(200);
    // Revoked (sessions revoke): signed out on both instances at once.
    const [session] = await a.gateway.store.listSessions('bob');
    await b.gateway.store.revoke(session!.sid);
    expect((await get(a.base, '/app/x', { cookie: `__Host-gateway=${cookie.value}` })).status).toBe(401);
    expect((await get(b.base, '/app/x', { cookie: `__Host-gateway=${cookie.value}` })).status).toBe(401);
    await page.browserContext().close();
  });

  it('signs in a store user with JavaScript off, and a directory (LDAP) user', async () => {
    const page = await freshPage();
    await page.setJavaScriptEnabled(false);
    await page.goto(`${a.base}/app/nojs`, { timeout: STEP_MS });
    await submit(page, 'carol', 'carol-password');
    expect(page.url()).toBe(`${a.base}/app/nojs`);
    expect(await page.content()).toContain('"x-authenticated-user":"carol"');
    expect(await a.gateway.store.listSessions('carol')).toHaveLength(1);
    await page.browserContext().close();
    const ldap = await freshPage();
    await ldap.goto(`${b.base}/app/ldap`, { timeout: STEP_MS });
    await submit(ldap, 'dave', 'dave-password');
    expect(ldap.url()).toBe(`${b.base}/app/ldap`);
    expect(JSON.parse(await bodyText(ldap)).headers['x-authenticated-user']).toBe('dave');
    await ldap.browserContext().close();
  });

  it('answers a wrong password and an unknown user alike, tied to the fields; a lock says when to try again', async () => {
    const page = await freshPage();
    await page.goto(`${a.base}/auth/sign-in`, { timeout: STEP_MS });
    await submit(page, 'eve', 'not-her-password');
    const wrong = await page.$eval('#sign-in-error', (el) => (el as unknown as { innerText: string }).innerText);
    expect(wrong).toBe('The user name or password is wrong.');
    expect(await page.$eval('#password', (el) => el.getAttribute('aria-describedby'))).toBe('sign-in-error');
    expect(await page.$eval('#username', (el) => (el as unknown as { value: string }).value)).toBe('eve');
    await checkPage(page, 'sign-in-wrong-password');
    await submit(page, 'nobody-here', 'whatever');
    expect(await page.$eval('#sign-in-error', (el) => (el as unknown as { innerText: string }).innerText)).toBe(wrong);
    // Two more wrong passwords for eve from this address: locked (maxFailuresPerUser 3), the right one too.
    await submit(page, 'eve', 'still-wrong');
    await submit(page, 'eve', 'wrong-again');
    await submit(page, 'eve', 'eve-password');
    const locked = await page.$eval('#sign-in-error', (el) => (el as unknown as { innerText: string }).innerText);
    expect(locked).toMatch(/^Too many failed attempts\. Try again in \d+ minute\(s\), at \d\d:\d\d UTC\.$/);
    await checkPage(page, 'sign-in-locked');
    expect(await a.gateway.store.listSessions('eve')).toHaveLength(0);
    await page.browserContext().close();
  });

  it('refuses a form posted from another site (403) and a post without the page\'s token', async () => {
    // Another origin's page (the upstream, plain HTTP) with a form that posts to the gateway.
    echo.handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><form method="post" action="${a.base}/auth/sign-in"><input name="username" value="bob"><input name="password" value="bob-password"><button>go</button></form>`);
    };
    const page = await freshPage();
    try {
      // The browser has the gateway's form cookie (it saw the page) before the other site posts.
      await page.goto(`${a.base}/auth/sign-in`, { timeout: STEP_MS });
      await page.goto(`${echo.url}/evil`, { timeout: STEP_MS });
      const [answer] = await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('button')]);
      expect(answer!.status()).toBe(403);
      expect(JSON.parse(await bodyText(page))).toMatchObject({ code: 'forbidden' });
      expect(await a.gateway.store.listSessions('bob')).toHaveLength(0);
    } finally {
      echo.handler = echoHandler;
      await page.browserContext().close();
    }
    // Same origin, but without the page's token: 403 too.
    const forged = await httpsCall(`${a.base}/auth/sign-in`, ca.caFile, {
      method: 'POST',
      headers: { origin: a.base, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      body: 'username=bob&password=bob-password',
    });
    expect(forged.status).toBe(403);
    expect(forged.headers['content-type']).toContain('application/problem+json');
  });

  it('sign-out: a GET shows a page asking to confirm (a cross-site link signs nobody out); its POST ends the session and lands on the sign-in page', async () => {
    const page = await freshPage();
    await page.goto(`${a.base}/app/out`, { timeout: STEP_MS });
    await submit(page, 'bob', 'bob-password');
    expect(await a.gateway.store.listSessions('bob')).toHaveLength(1);
    // A link from another site to the sign-out path: only the confirmation page.
    echo.handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><a id="out" href="${a.base}/auth/logout">out</a><img src="${a.base}/auth/logout" alt="">`);
    };
    try {
      await page.goto(`${echo.url}/link`, { timeout: STEP_MS });
      await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('#out')]);
    } finally {
      echo.handler = echoHandler;
    }
    expect(page.url()).toBe(`${a.base}/auth/logout`);
    expect(await a.gateway.store.listSessions('bob')).toHaveLength(1);
    expect(await bodyText(page)).toContain('You are signed in as bob.');
    await checkPage(page, 'sign-out');
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form button[type=submit]')]);
    expect(page.url()).toBe(`${a.base}/auth/sign-in`);
    expect(await a.gateway.store.listSessions('bob')).toHaveLength(0);
    expect((await page.browserContext().cookies()).find((c) => c.name === '__Host-gateway')).toBeUndefined();
    await page.browserContext().close();
  });

  it('/auth/me lists the sessions of two browsers and ends the other one, which is signed out on every instance; JSON for cookie and bearer', async () => {
    const [one, two] = [await freshPage(), await freshPage()];
    for (const page of [one, two]) {
      await page.goto(`${a.base}/auth/me`, { timeout: STEP_MS });
      expect(page.url()).toBe(`${a.base}/auth/sign-in?rd=%2Fauth%2Fme`);
      await submit(page, 'frank', 'frank-password');
      expect(page.url()).toBe(`${a.base}/auth/me`);
    }
    await one.reload({ timeout: STEP_MS });
    expect(await one.$$eval('tbody tr', (rows) => rows.length)).toBe(2);
    // Each session shows the address and the browser it was signed in from (noted beside the session).
    const cells = await one.$$eval('tbody tr', (rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent ?? '')));
    for (const row of cells) {
      expect(row[2]).toBe('127.0.0.1');
      expect(row[3]).toMatch(/^(Headless )?Chrom(e|ium) on Linux$/);
    }
    const text = await bodyText(one);
    expect(text).toContain('frank');
    expect(text).toContain('your password');
    expect(text).toContain('This browser');
    await checkPage(one, 'me');
    const twoCookie = (await two.browserContext().cookies()).find((c) => c.name === '__Host-gateway')!.value;
    expect((await get(b.base, '/app/still', { cookie: `__Host-gateway=${twoCookie}` })).status).toBe(200);
    await Promise.all([one.waitForNavigation({ timeout: STEP_MS }), one.click('tbody form button[type=submit]')]);
    expect(one.url()).toBe(`${a.base}/auth/me`);
    expect(await one.$$eval('tbody tr', (rows) => rows.length)).toBe(1);
    // The other browser is signed out on both instances: its next navigation goes to sign in.
    const [onA, onB] = await Promise.all([get(a.base, '/app/x', { cookie: `__Host-gateway=${twoCookie}` }), get(b.base, '/app/x', { cookie: `__Host-gateway=${twoCookie}` })]);
    expect([onA.status, onB.status]).toEqual([401, 401]);
    await two.goto(`${b.base}/app/after`, { timeout: STEP_MS });
    expect(two.url()).toBe(`${b.base}/auth/sign-in?rd=%2Fapp%2Fafter`);
    // The same as JSON, for the cookie and for a bearer token of the gateway (its own session only).
    const oneCookie = (await one.browserContext().cookies()).find((c) => c.name === '__Host-gateway')!.value;
    const asJson = await get(b.base, '/auth/me', { cookie: `__Host-gateway=${oneCookie}`, accept: 'application/json' });
    expect(asJson.status).toBe(200);
    expect(JSON.parse(asJson.body)).toMatchObject({ user: 'frank', signedInWith: 'password', sessions: [{ current: true, address: '127.0.0.1', device: expect.stringMatching(/Chrom(e|ium) on Linux$/) }] });
    const created = await httpsCall(`${a.base}/v1/tokens/create`, ca.caFile, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ appKey: 'frank', appSecret: 'frank-password' }) });
    expect(created.status, created.body).toBe(200);
    const bearer = await get(a.base, '/auth/me', { authorization: `Bearer ${(JSON.parse(created.body) as { accessToken: string }).accessToken}`, accept: 'application/json' });
    expect(bearer.status, bearer.body).toBe(200);
    const own = JSON.parse(bearer.body) as { signedInWith: string; sessions: Array<{ current: boolean }> };
    expect(own.signedInWith).toBe('token');
    // A token session was made by no browser sign-in: nothing noted.
    expect(own.sessions).toEqual([expect.objectContaining({ current: true, address: 'unknown', device: 'unknown' })]);
    expect(await a.gateway.store.listSessions('frank')).toHaveLength(2);
    // Without a session: a browser goes to sign in, an API client gets 401.
    expect((await get(a.base, '/auth/me', { accept: 'application/json' })).status).toBe(401);
    await Promise.all([one.browserContext().close(), two.browserContext().close()]);
  });
});
