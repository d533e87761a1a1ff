import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cookieSessionAuthenticator, openSession, SESSION_PURPOSE } from '../../../src/auth/cookie-session.js';
import { safeReturnPath } from '../../../src/auth/login.js';
import { cookieValue, Sealer, withoutCookies } from '../../../src/auth/seal.js';
import { checkConfig } from '../../../src/config/validate.js';
import type { IncomingMessage } from 'node:http';
import type { Exchange } from '../../../src/core/exchange.js';
import type { Principal } from '../../../src/core/principal.js';

describe('where a browser is sent back after signing in', () => {
  it.each([
    ['/app/page?x=1', '/app/page?x=1'],
    ['/', '/'],
    ['/app/a%20b', '/app/a%20b'],
  ])('keeps the same-origin path %s', (raw, kept) => {
    expect(safeReturnPath(raw)).toBe(kept);
  });

  it.each([
    '//evil.example/x', '/\\evil.example/x', '/\\/evil.example', 'https://evil.example/', 'http:evil.example', 'javascript:alert(1)',
    '', 'app', '/app\\..\\x', '/a\tb', '/a\nb', '/\u0000', ' /app', `/${'a'.repeat(3000)}`,
  ])('never sends it elsewhere: %j becomes /', (raw) => {
    expect(safeReturnPath(raw)).toBe('/');
  });

  it.each(['/.//evil.example', '/..//evil.example', '/a/..//evil.example', '/%2e//evil.example', '/./\\evil.example'])('judges %j once normalized too: /', (raw) => {
    expect(safeReturnPath(raw)).toBe('/');
  });

  it('keeps a path that percent-encoding lengthens past 2 KiB out (its second reading would refuse it)', () => {
    expect(safeReturnPath(`/${'é'.repeat(1000)}`)).toBe('/');
    expect(safeReturnPath(`/${'é'.repeat(300)}`)).toBe(`/${'%C3%A9'.repeat(300)}`);
  });

  it('is idempotent and never answers a path a browser reads as another host (property)', () => {
    const piece = fc.constantFrom('/', '//', '.', '..', '/./', '/../', '\\', '%2e', '%2E', '%2f', '%5c', '?', '#', '@', ':', 'evil.example', 'a', 'é', '\u3002', '\t', ' ', '%00', '%');
    const path = fc.oneof(
      fc.array(piece, { maxLength: 12 }).map((p) => p.join('')),
      fc.array(piece, { maxLength: 12 }).map((p) => `/${p.join('')}`),
      fc.string({ unit: 'binary', maxLength: 40 }).map((p) => `/${p}`),
      fc.tuple(fc.constantFrom('/', '/a'), fc.nat({ max: 1200 })).map(([p, n]) => `${p}${'é'.repeat(n)}`),
    );
    fc.assert(fc.property(path, (raw) => {
      const once = safeReturnPath(raw);
      expect(safeReturnPath(once)).toBe(once);
      expect(once.startsWith('/')).toBe(true);
      expect(once.startsWith('//') || once.startsWith('/\\')).toBe(false);
      expect(new URL(once, 'https://gateway.invalid').origin).toBe('https://gateway.invalid');
    }), { numRuns: 3000 });
  });
});

describe('sealed cookies', () => {
  const sealer = new Sealer(randomBytes(32));

  it('open to what was sealed, for the same purpose only, and not when changed or under another key', () => {
    const sealed = sealer.seal('a', { x: 1 });
    expect(sealer.open('a', sealed)).toEqual({ x: 1 });
    expect(sealer.open('b', sealed)).toBeUndefined();
    const changed = `${sealed.slice(0, 20)}${sealed[20] === 'A' ? 'B' : 'A'}${sealed.slice(21)}`;
    expect(sealer.open('a', changed)).toBeUndefined();
    expect(new Sealer(randomBytes(32)).open('a', sealed)).toBeUndefined();
    expect(sealer.open('a', 'garbage')).toBeUndefined();
    // The handle says nothing readable: not the session id, not the user.
    const session = sealer.seal(SESSION_PURPOSE, { sid: 'the-session-id', user: 'alice', groups: [], exp: 1 });
    expect(Buffer.from(session, 'base64url').toString('latin1')).not.toMatch(/alice|the-session-id/);
    expect(openSession(sealer, session)).toMatchObject({ sid: 'the-session-id', user: 'alice' });
  });

  it('cookie headers: one value read, the gateway\'s own left out for the upstream', () => {
    expect(cookieValue('a=1; __Host-gateway=xyz; b=2', '__Host-gateway')).toBe('xyz');
    expect(cookieValue('a=1; x__Host-gateway=xyz', '__Host-gateway')).toBeUndefined();
    expect(cookieValue(undefined, 'a')).toBeUndefined();
    const own = (n: string) => n === '__Host-gateway' || n.startsWith('__Host-gateway-login-');
    expect(withoutCookies('a=1; __Host-gateway=xyz; b=2; __Host-gateway-login-abc=s', own)).toBe('a=1; b=2');
    expect(withoutCookies('__Host-gateway=xyz', own)).toBeUndefined();
  });
});

describe('the cookie session authenticator', () => {
  const sealer = new Sealer(randomBytes(32));
  let live: boolean | undefined = true;
  const store = { isLiveNow: () => live, isLive: async () => live === true };
  const auth = cookieSessionAuthenticator('__Host-gateway', sealer, store, () => 1_000_000);
  const req = (cookie?: string) => ({ headers: cookie === undefined ? {} : { cookie } }) as IncomingMessage;
  const ex = {} as Exchange;
  const value = sealer.seal(SESSION_PURPOSE, { sid: 's1', user: 'alice', groups: ['staff'], exp: 2000 });

  it('answers synchronously on a liveness cache hit, with an ambient principal that carries the session and groups', () => {
    live = true;
    const principal = auth.verify(auth.parse(req(`x=1; __Host-gateway=${value}`))!, ex) as Principal;
    expect(principal).toMatchObject({ user: 'alice', via: 'oidc-session', sid: 's1', groups: ['staff'], ownGroups: true, ambient: true, expiresAt: 2000 });
  });

  it('is not asked without its cookie, refuses a forged, an expired and a revoked one', async () => {
    expect(auth.parse(req())).toBeUndefined();
    expect(auth.parse(req('other=1'))).toBeUndefined();
    expect(() => auth.verify('forged-forged-forged-forged-forged-forged-forged', ex)).toThrow(/not one this gateway made/);
    const old = sealer.seal(SESSION_PURPOSE, { sid: 's2', user: 'alice', groups: [], exp: 999 });
    expect(() => auth.verify(old, ex)).toThrow(/expired/);
    live = false;
    expect(() => auth.verify(value, ex)).toThrow(/ended/);
    live = undefined;
    await expect(auth.verify(value, ex)).rejects.toThrow(/ended/);
    expect(await auth.recheck({ proof: value } as Principal)).toBe('invalid_token');
  });
});

describe('the login section', () => {
  const base = {
    users: { htpasswd: 'u' },
    tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
    upstreams: { up: { url: 'http://127.0.0.1:1' } },
    identity: { issuers: [{ name: 'corp', issuer: 'https://idp.example.com', audiences: ['gw'] }] },
  };
  const problems = (extra: Record<string, unknown>) => checkConfig({ ...base, ...extra }, '', '/tmp').problems;

  it('needs a configured issuer, a client id and openid; routes[].login needs it', () => {
    expect(problems({ login: { issuer: 'corp', clientId: 'gw' }, routes: [{ path: '/app', upstream: 'up', login: true }] })).toEqual([]);
    expect(problems({ login: { issuer: 'nope', clientId: 'gw' } })).toEqual(['login.issuer names no identity.issuers entry (known: corp)']);
    expect(problems({ login: { issuer: 'corp' } })).toEqual(['login.clientId is required']);
    expect(problems({ login: { issuer: 'corp', clientId: 'gw', scopes: ['profile'] } })[0]).toMatch(/^login.scopes must include openid/);
    expect(problems({ routes: [{ path: '/app', upstream: 'up', login: true }] })).toEqual(['routes[0].login needs the login section (the provider browsers sign in at)']);
  });

  it('warns when the issuer\'s audiences list the sign-in client id (its ID tokens would pass as bearer tokens)', () => {
    const listed = { ...base, identity: { issuers: [{ name: 'corp', issuer: 'https://idp.example.com', audiences: ['gw-api', 'gw'] }] } };
    expect(checkConfig({ ...listed, login: { issuer: 'corp', clientId: 'gw' } }, '', '/tmp').warnings).toEqual([expect.stringMatching(/^identity\.issuers\[0\]\.audiences lists login\.clientId \(gw\)/)]);
    expect(checkConfig({ ...base, login: { issuer: 'corp', clientId: 'gw-client' } }, '', '/tmp').warnings).toEqual([]);
  });

  it('keeps its paths apart from routes, and publicUrl an https origin (http on loopback only)', () => {
    expect(problems({ login: { issuer: 'corp', clientId: 'gw' }, routes: [{ path: '/auth', upstream: 'up' }] })[0]).toMatch(/^routes\[0\]\.path covers \/auth\/callback/);
    expect(problems({ login: { issuer: 'corp', clientId: 'gw', publicUrl: 'http://gw.example.com' } })[0]).toMatch(/^login.publicUrl must be https/);
    expect(problems({ login: { issuer: 'corp', clientId: 'gw', publicUrl: 'https://gw.example.com/app' } })[0]).toMatch(/origin only/);
    expect(checkConfig({ ...base, login: { issuer: 'corp', clientId: 'gw', publicUrl: 'https://gw.example.com/' } }, '', '/tmp').config.login?.publicUrl).toBe('https://gw.example.com');
    expect(problems({ login: { issuer: 'corp', clientId: 'gw', logoutPath: '/auth/callback' } })).toEqual(['login callbackPath, logoutPath and backchannelLogoutPath must differ']);
    expect(problems({ login: { issuer: 'corp', clientId: 'gw', signInPath: '/auth' } })[0]).toMatch(/^login.signInPath must differ/);
  });

  it('login.local alone needs no provider; without it (or an issuer) the section is refused', () => {
    const local = checkConfig({ ...base, login: { local: true }, routes: [{ path: '/app', upstream: 'up', login: true }] }, '', '/tmp');
    expect(local.problems).toEqual([]);
    expect(local.config.login?.issuer).toBeUndefined();
    expect(local.config.login).toMatchObject({ local: true, signInPath: '/auth/sign-in', postLogoutRedirectUri: '/auth/sign-in', page: { title: 'auth-gateway' } });
    expect(problems({ login: { clientId: 'gw' } })).toEqual(['login.issuer is required (or set login.local: true for a sign-in page of the gateway\'s own users)']);
    // The last release's form: sign-out lands on / (sent to the provider as post_logout_redirect_uri).
    expect(checkConfig({ ...base, login: { issuer: 'corp', clientId: 'gw' } }, '', '/tmp').config.login?.postLogoutRedirectUri).toBe('/');
  });

  it('login.providers lists several providers; the one-provider form is a list of one; a file with both is refused', () => {
    const two = { ...base, identity: { issuers: [...base.identity.issuers, { name: 'partner', issuer: 'https://partner.example.com', audiences: ['gw'] }] } };
    const listed = checkConfig({ ...two, login: { providers: [{ issuer: 'corp', clientId: 'gw-c', label: 'Corp SSO' }, { issuer: 'partner', clientId: 'gw-p', clientSecret: 's' }] } }, '', '/tmp');
    expect(listed.problems).toEqual([]);
    expect(listed.config.login?.providers).toEqual([
      { issuer: 'corp', clientId: 'gw-c', clientSecret: undefined, scopes: ['openid', 'profile', 'email'], label: 'Corp SSO' },
      { issuer: 'partner', clientId: 'gw-p', clientSecret: 's', scopes: ['openid', 'profile', 'email'], label: 'partner' },
    ]);
    expect(checkConfig({ ...base, login: { issuer: 'corp', clientId: 'gw', clientSecret: 'x' } }, '', '/tmp').config.login?.providers).toEqual([
      { issuer: 'corp', clientId: 'gw', clientSecret: 'x', scopes: ['openid', 'profile', 'email'], label: 'corp' },
    ]);
    expect(problems({ login: { issuer: 'corp', clientId: 'gw', providers: [{ issuer: 'corp', clientId: 'gw' }] } })[0]).toMatch(/^login.providers is the other form of login.issuer/);
    expect(checkConfig({ ...two, login: { providers: [{ issuer: 'corp', clientId: 'a' }, { issuer: 'corp', clientId: 'b' }] } }, '', '/tmp').problems).toEqual(['login.providers names an issuer more than once']);
    expect(problems({ login: { providers: [{ issuer: 'nope' }] } })).toEqual(['login.providers[0].clientId is required', 'login.providers[0].issuer names no identity.issuers entry (known: corp)']);
    expect(problems({ login: { providers: [{ issuer: 'corp', clientId: 'gw', scopes: ['profile'] }] } })[0]).toMatch(/^login.providers\[0\].scopes must include openid/);
  });

  it('takes postLogoutRedirectUri as an absolute URL exactly as written or a path, and a logo as https:// or a path', () => {
    const read = (extra: Record<string, unknown>) => checkConfig({ ...base, login: { local: true, ...extra } }, '', '/tmp');
    expect(read({ postLogoutRedirectUri: 'https://www.example.com/bye?x=1' }).config.login?.postLogoutRedirectUri).toBe('https://www.example.com/bye?x=1');
    expect(read({ postLogoutRedirectUri: '/goodbye' }).config.login?.postLogoutRedirectUri).toBe('/goodbye');
    expect(read({ postLogoutRedirectUri: '//evil.example' }).problems[0]).toMatch(/^login.postLogoutRedirectUri a path must start with a single \//);
    expect(read({ postLogoutRedirectUri: 'javascript:alert(1)' }).problems[0]).toMatch(/^login.postLogoutRedirectUri must be an absolute http\(s\) URL/);
    expect(read({ page: { logoUrl: 'http://cdn.example.com/logo.png' } }).problems[0]).toMatch(/^login.page.logoUrl must be a https: URL/);
    expect(read({ page: { logoUrl: '/static/logo.png', title: 'Example' } }).config.login?.page).toMatchObject({ logoUrl: '/static/logo.png', title: 'Example' });
    expect(read({ page: { templatesDir: 'my-pages' } }).config.login?.page.templatesDir).toBe('/tmp/my-pages');
    expect(read({ page: { colour: 'red' } }).problems[0]).toMatch(/^login.page.colour is not a known setting/);
  });
});
