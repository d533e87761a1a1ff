import { createHash, createPublicKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { echoUpstream, htpasswd, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { httpsCall, signingKey, TestCa, TestProvider, type SigningKey } from '../support/oidc-provider.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { forge } from '../security/jwt-forge.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { checkConnections } from '../../src/cli/connect.js';

/**
 * Browser sign-in and back-channel logout against a real OpenID Provider (node-oidc-provider in its own
 * process, loopback HTTPS, a test CA) and a real browser (Debian's chromium, headless, driven by
 * puppeteer-core): two gateway instances on HTTPS sharing one Redis.
 */

const STEP_MS = 30_000;
const CLIENT_SECRET = 'gateway-client-secret';
const BACKCHANNEL_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

let ca: TestCa;
let rsa: SigningKey;
let provider: TestProvider;
let redis: TestRedis;
let users: Users;
let echo: EchoUpstream;
let a: RunningGateway;
let b: RunningGateway;
let browser: Browser;
let profile: string;

/** Accounts whose preferred_username the bearer path refuses (isUsableName): sign-in must refuse them too. */
const UNUSABLE_ACCOUNTS: Record<string, { preferred_username: string }> = {
  crlf: { preferred_username: 'eve\r\nX-Authenticated-User: admin' },
  nul: { preferred_username: 'eve\u0000admin' },
  surrogate: { preferred_username: 'eve\ud800' },
  long: { preferred_username: 'e'.repeat(3000) },
};

function gatewayConfig(): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 500, tls: { certFile: ca.certFile, keyFile: ca.keyFile } },
    // Chromium shares the cores with the suite; this file is not about outages, so a slow command is no 503.
    store: { kind: 'redis', url: redis.url, commandTimeoutMs: 3000 },
    identity: { issuers: [{ name: 'corp', issuer: provider.issuer, audiences: ['gateway-api'], userClaim: 'preferred_username', groupsClaim: 'groups', caFile: ca.caFile }] },
    login: { issuer: 'corp', clientId: 'gateway', clientSecret: CLIENT_SECRET, scopes: ['openid', 'profile', 'groups'] },
    forwardAuth: { path: '/auth/verify' },
    upstreams: { app: { url: echo.url } },
    routes: [
      { path: '/app', upstream: 'app', login: true },
      { path: '/api', upstream: 'app' },
    ],
  };
}

beforeAll(async () => {
  ca = new TestCa();
  rsa = signingKey('rsa');
  [provider, redis, echo] = await Promise.all([
    TestProvider.start(ca, { keys: [rsa], resources: {}, clients: [], accounts: { alice: { preferred_username: 'alice', groups: ['staff', 'dev'] }, ...UNUSABLE_ACCOUNTS } }),
    startRedis(),
    echoUpstream(),
  ]);
  // The upstream's WebSocket: greets, then echoes.
  new WebSocketServer({ server: echo.server }).on('connection', (ws) => {
    ws.send('hello');
    ws.on('message', (d) => ws.send(`echo:${String(d)}`));
  });
  users = htpasswd({ bob: 'bob-password' });
  [a, b] = await Promise.all([startGateway(testConfig(users.file, gatewayConfig())), startGateway(testConfig(users.file, gatewayConfig()))]);
  // The client, now that the gateways' addresses are known (same port, same issuer, same keys).
  await provider.restart({
    clients: [{
      client_id: 'gateway',
      client_secret: CLIENT_SECRET,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: [`${a.base}/auth/callback`, `${b.base}/auth/callback`],
      // Where sign-out lands (login.postLogoutRedirectUri, by default / on the gateway's origin).
      post_logout_redirect_uris: [`${a.base}/`],
      backchannel_logout_uri: `${a.base}/auth/backchannel-logout`,
      backchannel_logout_session_required: true,
    }],
  });
  // Chromium trusts the test certificate by its public key (provider and gateways share it), nothing else.
  const spki = createHash('sha256').update(createPublicKey(readFileSync(ca.certFile)).export({ type: 'spki', format: 'der' })).digest('base64');
  profile = mkdtempSync(join(tmpdir(), 'gw-chromium-'));
  browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    protocolTimeout: STEP_MS,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', `--user-data-dir=${profile}`, `--ignore-certificate-errors-spki-list=${spki}`],
  });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all([a?.close(), b?.close()]);
  await echo?.close();
  await provider?.close();
  await redis?.destroy();
  users?.remove();
  ca?.remove();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** Fills the provider's development login form (and its consent, when asked) until the browser is back at `base`. */
async function signInAtProvider(page: Page, base: string, login = 'alice'): Promise<void> {
  for (let i = 0; i < 4 && !page.url().startsWith(base); i++) {
    await page.waitForSelector('form button[type=submit]', { timeout: STEP_MS });
    if (await page.$('input[name=login]')) {
      await page.type('input[name=login]', login);
      await page.type('input[name=password]', 'any-password');
    }
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form button[type=submit]')]);
  }
  expect(page.url().startsWith(base), `stuck at ${page.url()}:\n${provider.log()}`).toBe(true);
}

async function sessionCookie(page: Page): Promise<string> {
  const cookie = (await page.browserContext().cookies()).find((c) => c.name === '__Host-gateway');
  expect(cookie).toBeDefined();
  return cookie!.value;
}

function get(base: string, path: string, headers: Record<string, string> = {}) {
  return httpsCall(`${base}${path}`, ca.caFile, { method: 'GET', headers });
}

function backchannel(token: string | undefined, base = a.base) {
  return httpsCall(`${base}/auth/backchannel-logout`, ca.caFile, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: token === undefined ? '' : new URLSearchParams({ logout_token: token }).toString(),
  });
}

describe('browser sign-in (authorization code + PKCE) at a real provider, in a real browser', () => {
  let cookie: string;

  it('a browser navigation to a login route without a session is sent to the provider; other requests keep 401', async () => {
    const nav = await get(a.base, '/app/hello?x=1', { accept: 'text/html,application/xhtml+xml' });
    expect(nav.status).toBe(302);
    const location = new URL(String(nav.headers.location));
    expect(location.origin).toBe(provider.issuer);
    expect(location.searchParams.get('code_challenge_method')).toBe('S256');
    expect(location.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(location.searchParams.get('state')).toBeTruthy();
    expect(location.searchParams.get('nonce')).toBeTruthy();
    expect(location.searchParams.get('redirect_uri')).toBe(`${a.base}/auth/callback`);
    const setCookie = String(nav.headers['set-cookie']);
    expect(setCookie).toMatch(/^__Host-gateway-login-[A-Za-z0-9_-]{12}=[A-Za-z0-9_-]+; Path=\/; Secure; HttpOnly; SameSite=Lax; Max-Age=600$/);
    // An API client, an unsafe method, a route without login: the 401 as before.
    expect((await get(a.base, '/app/hello', { accept: 'application/json' })).status).toBe(401);
    expect((await get(a.base, '/api/hello', { accept: 'text/html' })).status).toBe(401);
    const post = await httpsCall(`${a.base}/app/hello`, ca.caFile, { method: 'POST', headers: { accept: 'text/html' }, body: '' });
    expect(post.status).toBe(401);
    // A callback without the sign-in's state cookie is refused.
    const forged = await get(a.base, `/auth/callback?code=x&state=${location.searchParams.get('state')}`);
    expect(forged.status).toBe(400);
    expect(JSON.parse(forged.body)).toMatchObject({ code: 'invalid_request' });
  });

  it('a callback with the provider\'s refusal is 403, with a code the provider never issued 400; neither makes a session', async () => {
    const start = await get(a.base, '/app/x', { accept: 'text/html' });
    const state = new URL(String(start.headers.location)).searchParams.get('state')!;
    const stateCookie = String(start.headers['set-cookie']).split(';')[0]!;
    const refused = await get(a.base, `/auth/callback?error=access_denied&state=${state}&iss=${encodeURIComponent(provider.issuer)}`, { cookie: stateCookie });
    expect(refused.status, refused.body).toBe(403);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'forbidden' });
    const forgedCode = await get(a.base, `/auth/callback?code=never-issued&state=${state}&iss=${encodeURIComponent(provider.issuer)}`, { cookie: stateCookie });
    expect(forgedCode.status, forgedCode.body).toBe(400);
    expect(forgedCode.headers['set-cookie']).toBeUndefined();
    // Another sign-in's state with this cookie: refused before the provider is asked.
    const otherState = await get(a.base, `/auth/callback?code=x&state=not-${state}&iss=${encodeURIComponent(provider.issuer)}`, { cookie: stateCookie });
    expect(otherState.status).toBe(400);
    expect(await a.gateway.store.listSessions('alice')).toHaveLength(0);
  });

  it('signs in at the provider\'s form and comes back to the original URL with the upstream\'s answer', async () => {
    const page = await browser.newPage();
    await page.goto(`${a.base}/app/hello?x=1`, { timeout: STEP_MS });
    expect(page.url().startsWith(provider.issuer)).toBe(true);
    await signInAtProvider(page, a.base);
    expect(page.url()).toBe(`${a.base}/app/hello?x=1`);
    const seen = JSON.parse(await page.evaluate(() => (globalThis as unknown as { document: { body: { innerText: string } } }).document.body.innerText)) as { url: string; headers: Record<string, string> };
    expect(seen.url).toBe('/app/hello?x=1');
    expect(seen.headers['x-authenticated-user']).toBe('alice');
    expect(seen.headers['x-authenticated-via']).toBe('oidc-session');
    expect(seen.headers['x-authenticated-groups']).toBe('staff,dev');
    // The session cookie is the gateway's credential: the upstream gets the browser's other cookies only.
    expect(seen.headers.cookie ?? '').not.toContain('__Host-gateway');
    const c = (await page.browserContext().cookies()).find((x) => x.name === '__Host-gateway')!;
    expect(c).toMatchObject({ secure: true, httpOnly: true, sameSite: 'Lax', path: '/' });
    cookie = c.value;
    // A gateway session in the store, like a token session: listed for the user.
    expect(await a.gateway.store.listSessions('alice')).toHaveLength(1);
    // The other instance takes the same cookie (one Redis).
    const other = await get(b.base, '/app/again', { cookie: `__Host-gateway=${cookie}` });
    expect(other.status).toBe(200);
    // Its page of sessions says where the session was signed in from (noted at the callback).
    const me = await get(b.base, '/auth/me', { cookie: `__Host-gateway=${cookie}`, accept: 'application/json' });
    expect(me.status, me.body).toBe(200);
    expect(JSON.parse(me.body)).toMatchObject({ sessions: [{ current: true, address: '127.0.0.1', device: expect.stringMatching(/Chrom(e|ium) on Linux$/) }] });
    await page.close();
  }, 120_000);

  it('refuses an unsafe method with the cookie from another origin (403), and lets the gateway\'s own origin through', async () => {
    const page = await browser.newPage();
    // Another origin of the same site (127.0.0.1, https, another port): the browser sends the Lax cookie.
    await page.goto(`${b.base}/healthz`, { timeout: STEP_MS });
    const target = `${a.base}/app/write`;
    const refused = page.waitForResponse((r) => r.url() === target, { timeout: STEP_MS });
    await page.evaluate((url) => void fetch(url, { method: 'POST', mode: 'no-cors', credentials: 'include', body: 'x=1' }).catch(() => {}), target);
    expect((await refused).status()).toBe(403);
    expect(echo.received.some((r) => r.url === '/app/write')).toBe(false);
    // The same request from a page of the gateway's own origin passes.
    await page.goto(`${a.base}/app/page`, { timeout: STEP_MS });
    const status = await page.evaluate(async (url) => (await fetch(url, { method: 'POST', body: 'x=1' })).status, target);
    expect(status).toBe(200);
    expect(echo.received.some((r) => r.url === '/app/write' && r.method === 'POST')).toBe(true);
    await page.close();
  }, 120_000);

  it('a POST or DELETE with the cookie and neither Origin nor Sec-Fetch-Site: same-origin is refused (403, naming the cookie)', async () => {
    const send = (method: string, headers: Record<string, string>) => httpsCall(`${a.base}/app/no-origin`, ca.caFile, { method, headers: { cookie: `__Host-gateway=${cookie}`, ...headers }, body: '' });
    for (const method of ['POST', 'DELETE']) {
      const bare = await send(method, {});
      expect(bare.status, bare.body).toBe(403);
      expect(JSON.parse(bare.body)).toMatchObject({ code: 'cors_not_allowed', detail: expect.stringContaining('session cookie') });
      const crossSite = await send(method, { origin: 'https://evil.example' });
      expect(crossSite.status).toBe(403);
      expect(JSON.parse(crossSite.body).detail).toContain('with the session cookie');
      expect(JSON.parse(crossSite.body).detail).not.toContain('Basic');
      expect((await send(method, { 'sec-fetch-site': 'same-site' })).status).toBe(403);
    }
    expect(echo.received.some((r) => r.url === '/app/no-origin')).toBe(false);
    // A browser's own page: its Origin, or Sec-Fetch-Site: same-origin alone.
    expect((await send('POST', { origin: a.base })).status).toBe(200);
    expect((await send('DELETE', { 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    // Safe methods need neither.
    expect((await send('GET', {})).status).toBe(200);
  });

  it('forward-auth: takes the cookie session, and answers a navigation without one 401 with a Location to sign in', async () => {
    const described = { 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/app/report?q=1', 'x-forwarded-host': 'gw.example.test', 'x-forwarded-proto': 'https' };
    const ok = await get(a.base, '/auth/verify', { ...described, cookie: `__Host-gateway=${cookie}` });
    expect(ok.status, ok.body).toBe(200);
    expect(ok.headers['x-authenticated-user']).toBe('alice');
    expect(ok.headers['x-authenticated-groups']).toBe('staff,dev');
    const nav = await get(a.base, '/auth/verify', { ...described, accept: 'text/html' });
    expect(nav.status).toBe(401);
    expect(nav.headers.location).toBe('https://gw.example.test/auth/callback?rd=%2Fapp%2Freport%3Fq%3D1');
    expect(JSON.parse(nav.body)).toMatchObject({ code: 'missing_credentials' });
    // An API call through the proxy: no Location.
    expect((await get(a.base, '/auth/verify', described)).headers.location).toBeUndefined();
    // The Location starts a sign-in (here at the gateway itself).
    const start = await get(a.base, '/auth/callback?rd=%2Fapp%2Freport%3Fq%3D1');
    expect(start.status).toBe(302);
    expect(String(start.headers.location).startsWith(`${provider.issuer}/`)).toBe(true);
  });

  it('a back-channel logout sent by the provider ends the session on both instances before it answers, and closes its WebSocket', async () => {
    const page = await browser.newPage();
    await page.goto(`${b.base}/app/live`, { timeout: STEP_MS });
    // A WebSocket through instance B, opened by a page of B's origin with the session cookie.
    const greeting = await page.evaluate((url) => new Promise<string>((resolve, reject) => {
      const ws = new WebSocket(url);
      (globalThis as unknown as { closed?: number }).closed = undefined;
      ws.onmessage = (m) => resolve(String(m.data));
      ws.onerror = () => reject(new Error('websocket error'));
      ws.onclose = (e) => {
        (globalThis as unknown as { closed?: number }).closed = e.code;
      };
    }), `${b.base.replace('https', 'wss')}/app/ws`);
    expect(greeting).toBe('hello');
    const before = (await provider.backchannelLogouts()).ok;
    // The provider ends its session (its own end-session page, "Yes, sign me out"): it sends the
    // back-channel logout to instance A and waits for the answer before it finishes the page.
    const op = await browser.newPage();
    await op.goto(`${provider.issuer}/session/end`, { timeout: STEP_MS });
    await Promise.all([op.waitForNavigation({ timeout: STEP_MS }), op.click('button[name=logout][value=yes]')]);
    expect(await provider.backchannelLogouts()).toMatchObject({ ok: before + 1, error: [] });
    // Refused at once on both instances: no waiting.
    const [onA, onB] = await Promise.all([get(a.base, '/app/x', { cookie: `__Host-gateway=${cookie}` }), get(b.base, '/app/x', { cookie: `__Host-gateway=${cookie}` })]);
    expect([onA.status, onB.status]).toEqual([401, 401]);
    expect(JSON.parse(onB.body), onB.body).toMatchObject({ code: 'invalid_token' });
    expect(await a.gateway.store.listSessions('alice')).toHaveLength(0);
    await page.waitForFunction(() => (globalThis as unknown as { closed?: number }).closed !== undefined, { timeout: STEP_MS });
    // A navigation with the ended session is sent to sign in again.
    const again = await get(a.base, '/app/x', { cookie: `__Host-gateway=${cookie}`, accept: 'text/html' });
    expect(again.status).toBe(302);
    await op.close();
    await page.close();
  }, 120_000);

  it('sign-out: GET asks to confirm; the POST ends the session, clears the cookie and goes to the provider\'s end-session page with id_token_hint and post_logout_redirect_uri, which the provider honours', async () => {
    const page = await browser.newPage();
    await page.goto(`${a.base}/app/second`, { timeout: STEP_MS });
    await signInAtProvider(page, a.base);
    const signedIn = await sessionCookie(page);
    expect((await get(a.base, '/app/x', { cookie: `__Host-gateway=${signedIn}` })).status).toBe(200);
    // A GET (a link, an image, another site's redirect) only shows the page asking to confirm.
    await page.goto(`${a.base}/auth/logout`, { timeout: STEP_MS });
    expect((await get(a.base, '/app/x', { cookie: `__Host-gateway=${signedIn}` })).status).toBe(200);
    const logoutAnswer = page.waitForResponse((r) => r.url() === `${a.base}/auth/logout` && r.request().method() === 'POST', { timeout: STEP_MS });
    await Promise.all([page.waitForNavigation({ timeout: STEP_MS }), page.click('form button[type=submit]')]);
    const answer = await logoutAnswer;
    expect(answer.status()).toBe(303);
    const location = new URL(answer.headers().location!);
    expect(`${location.origin}${location.pathname}`).toBe(`${provider.issuer}/session/end`);
    expect(location.searchParams.get('id_token_hint')).toMatch(/^ey/);
    expect(location.searchParams.get('post_logout_redirect_uri')).toBe(`${a.base}/`);
    expect(location.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(page.url().startsWith(`${provider.issuer}/session/end`)).toBe(true);
    expect((await page.browserContext().cookies()).some((c) => c.name === '__Host-gateway')).toBe(false);
    const [onA, onB] = await Promise.all([get(a.base, '/app/x', { cookie: `__Host-gateway=${signedIn}` }), get(b.base, '/app/x', { cookie: `__Host-gateway=${signedIn}` })]);
    expect([onA.status, onB.status]).toEqual([401, 401]);
    // The user confirms at the provider: its session ends too (its back-channel logout finds nothing left
    // here), and the provider sends the browser to post_logout_redirect_uri.
    // (`/` is no route of this gateway: Chromium stops at its 401 Basic challenge; the redirect is what counts.)
    const confirmed = page.waitForResponse((r) => r.url() === `${provider.issuer}/session/end/confirm`, { timeout: STEP_MS });
    await page.click('button[name=logout][value=yes]');
    expect((await confirmed).headers().location).toBe(`${a.base}/?state=${location.searchParams.get('state')}`);
    expect((await provider.backchannelLogouts()).error).toEqual([]);
    await page.close();
  }, 120_000);

  it('two tabs signing in at once each come back to their own page (one state cookie per sign-in)', async () => {
    const [one, two] = [await browser.newPage(), await browser.newPage()];
    const first = await one.goto(`${a.base}/app/tab-one`, { timeout: STEP_MS });
    // The provider's authorization request of tab one (the gateway's 302), with tab one's state.
    const authorizeOne = first!.request().redirectChain()[0]!.response()!.headers().location!;
    await two.goto(`${a.base}/app/tab-two`, { timeout: STEP_MS });
    expect(one.url().startsWith(provider.issuer) && two.url().startsWith(provider.issuer)).toBe(true);
    // The later sign-in finishes first...
    await signInAtProvider(two, a.base);
    expect(two.url()).toBe(`${a.base}/app/tab-two`);
    // ...then tab one's request reaches the provider again (signed in there now: straight back to the
    // callback with tab one's state), and its own state cookie is still there.
    await one.goto(authorizeOne, { timeout: STEP_MS });
    await signInAtProvider(one, a.base);
    expect(one.url()).toBe(`${a.base}/app/tab-one`);
    expect((await one.browserContext().cookies()).filter((c) => c.name.startsWith('__Host-gateway-login-'))).toEqual([]);
    await Promise.all([one.close(), two.close()]);
  }, 120_000);
});

describe('a provider user name the bearer path refuses', () => {
  it.each(Object.keys(UNUSABLE_ACCOUNTS))('(%s) is refused at the callback with a 403 problem, and no session is made', async (login) => {
    // A browser context of its own: no provider session of another test's user.
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    const callback = page.waitForResponse((r) => r.url().startsWith(`${a.base}/auth/callback?`), { timeout: STEP_MS });
    await page.goto(`${a.base}/app/${login}`, { timeout: STEP_MS });
    await signInAtProvider(page, a.base, login);
    const answer = await callback;
    expect(answer.status(), await answer.text()).toBe(403);
    expect(answer.headers()['content-type']).toContain('application/problem+json');
    expect(JSON.parse(await answer.text())).toMatchObject({ code: 'forbidden', detail: expect.stringContaining('preferred_username is not a usable user name') });
    expect((await context.cookies()).some((c) => c.name === '__Host-gateway')).toBe(false);
    expect(await a.gateway.store.listSessions(UNUSABLE_ACCOUNTS[login]!.preferred_username)).toHaveLength(0);
    await context.close();
  }, 120_000);
});

describe('config check --connect', () => {
  it('reads the provider\'s discovery as sign-in does, and says what it supports; a missing CA fails it', async () => {
    const config = testConfig(users.file, gatewayConfig());
    const [line] = (await checkConnections(config)).filter((r) => r.what.startsWith('sign-in'));
    expect(line).toMatchObject({ ok: true, what: 'sign-in at corp (client gateway)' });
    expect(line!.detail).toContain(`authorization ${provider.issuer}/auth`);
    expect(line!.detail).toContain(`end-session ${provider.issuer}/session/end`);
    expect(line!.detail).toContain('back-channel logout supported with sid');
    const raw = gatewayConfig();
    (raw.identity as { issuers: Array<Record<string, unknown>> }).issuers[0]!.caFile = undefined;
    const [refused] = (await checkConnections(testConfig(users.file, raw))).filter((r) => r.what.startsWith('sign-in'));
    expect(refused!.ok).toBe(false);
    expect(refused!.detail).toMatch(/^discovery failed/);
  });
});

describe('back-channel logout tokens', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const token = (payload: Record<string, unknown>, key: SigningKey = rsa, header: Record<string, unknown> = {}) => forge(
    { alg: 'RS256', typ: 'logout+jwt', kid: key.kid, ...header },
    { iss: provider.issuer, aud: 'gateway', iat: now(), exp: now() + 120, jti: `j${Math.random()}`, events: { [BACKCHANNEL_EVENT]: {} }, sid: 'some-provider-session', ...payload },
    { alg: 'RS256', privateKey: key.privateKey },
  );

  it('answers 200 to a valid one (sid or sub) even when no session of it is known', async () => {
    expect((await backchannel(token({}))).status).toBe(200);
    expect((await backchannel(token({ sid: undefined, sub: 'someone' }))).status).toBe(200);
  });

  it('a token used once is refused the second time, on either instance, and a replay ends no session made since', async () => {
    const providerSid = `replayed-${Math.random()}`;
    const used = token({ sid: providerSid });
    expect((await backchannel(used)).status).toBe(200);
    // A later session of that provider session (as a sign-in files it), then the same token again.
    const later = await a.gateway.store.createSession({ sub: 'alice', uv: 'oidc' }, 60);
    await a.gateway.store.tagSession(later, [`oidc sid ${provider.issuer} ${providerSid}`], 60);
    for (const base of [a.base, b.base]) {
      const replay = await backchannel(used, base);
      expect(replay.status).toBe(400);
      expect(JSON.parse(replay.body)).toMatchObject({ code: 'invalid_request', error: 'invalid_request', error_description: expect.stringContaining('jti') });
    }
    expect(await a.gateway.store.isLive(later)).toBe(true);
    // A token of its own (another jti) still ends it.
    expect((await backchannel(token({ sid: providerSid }), b.base)).status).toBe(200);
    expect(await a.gateway.store.isLive(later)).toBe(false);
  });

  it('are documented in /openapi.json with the sign-in endpoints, and a refusal matches the document', async () => {
    const doc = JSON.parse((await get(a.base, '/openapi.json')).body) as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>> };
    expect(Object.keys(doc.paths['/auth/callback']!)).toEqual(['get']);
    expect(Object.keys(doc.paths['/auth/logout']!)).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/auth/backchannel-logout']!.post!.responses)).toEqual(expect.arrayContaining(['200', '400', '503']));
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema({ ...doc, $id: 'https://gw.invalid/openapi.json' });
    const validate = ajv.compile({ $ref: 'https://gw.invalid/openapi.json#/paths/~1auth~1backchannel-logout/post/responses/400/content/application~1problem+json/schema' });
    const refused = await backchannel(token({ nonce: 'n' }));
    expect(validate(JSON.parse(refused.body)) ? [] : validate.errors).toEqual([]);
    expect(validate({ type: 'urn:auth-gateway:problem:invalid_request', title: 'Bad Request', status: 400, detail: 'x', code: 'invalid_request' })).toBe(false);
  });

  it.each([
    ['no token', undefined],
    ['not a JWT', 'garbage'],
    ['another audience', () => token({ aud: 'other-client' })],
    ['another issuer', () => token({ iss: 'https://idp.invalid' })],
    ['no event', () => token({ events: {} })],
    ['a nonce', () => token({ nonce: 'n' })],
    ['neither sid nor sub', () => token({ sid: undefined })],
    ['no iat', () => token({ iat: undefined })],
    ['expired', () => token({ iat: now() - 600, exp: now() - 300 })],
    ['issued a year ago, without exp', () => token({ iat: now() - 365 * 86_400, exp: undefined })],
    ['issued past logoutTokenMaxAgeSeconds and the skew, with a valid exp', () => token({ iat: now() - 300 - 30 - 5, exp: now() + 60 })],
    ['issued in the future past the skew', () => token({ iat: now() + 60 })],
    ['no jti', () => token({ jti: undefined })],
    ['a jti that is not a string', () => token({ jti: 42 })],
    ['a key that is not the provider\'s', () => token({}, signingKey('rsa'))],
    ['alg none', () => `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ iss: provider.issuer })).toString('base64url')}.`],
  ])('refuses %s with 400 and the spec\'s error', async (_name, make) => {
    const res = await backchannel(typeof make === 'function' ? make() : make);
    expect(res.status).toBe(400);
    expect(String(res.headers['content-type'])).toContain('application/problem+json');
    expect(JSON.parse(res.body)).toMatchObject({ code: 'invalid_request', error: 'invalid_request' });
  });
});
