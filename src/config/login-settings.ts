import type { Checker } from './checker.js';
import { childrenOf, setting } from './defaults.js';
import { readScalars } from './sections.js';
import { isLoopback } from './issuer-settings.js';
import type { ForwardAuthConfig, IdentityConfig, LoginConfig, LoginPageConfig, LoginProviderConfig, RouteConfig } from './types.js';

/** `login`: browser sign-in at an OpenID provider (docs/openid.md). Absent, null or false for none. */

const PATH = /^\/(?:[A-Za-z0-9._~-]+\/)*[A-Za-z0-9._~-]+$/;
const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function readLogin(c: Checker, raw: unknown, identity: IdentityConfig, routes: RouteConfig[], forwardAuth: ForwardAuthConfig | undefined, at: (path: string) => string): LoginConfig | undefined {
  if (raw === undefined || raw === null || raw === false) {
    routes.forEach((r, i) => {
      if (r.login) c.problem(`routes[${i}].login`, 'needs the login section (the provider browsers sign in at)');
    });
    return undefined;
  }
  const l = c.obj('login', raw);
  c.unknownKeys('login', l, childrenOf('login'));
  const plain = readScalars(c, 'login', l, { except: ['postLogoutRedirectUri'] });
  const { issuer, callbackPath, logoutPath, backchannelLogoutPath, cookieName, signInPath, mePath } = plain;
  const listed = l.providers !== undefined && l.providers !== null;
  if (listed && (issuer || plain.clientId || plain.clientSecret || l.scopes !== undefined)) {
    c.problem('login.providers', 'is the other form of login.issuer, clientId, clientSecret and scopes: write one or the other');
  }
  // The last release's form needed issuer and clientId; the gateway's own users' page needs neither.
  if (!issuer && !listed && !plain.local) c.problem('login.issuer', 'is required (or set login.local: true for a sign-in page of the gateway\'s own users)');
  if (issuer && !plain.clientId) c.problem('login.clientId', 'is required');
  const scopes = readScopes(c, 'login.scopes', l.scopes);
  const providers = listed
    ? c.list('login.providers', l.providers).map((raw, i) => readProvider(c, `login.providers[${i}]`, c.obj(`login.providers[${i}]`, raw), identity))
    : issuer ? [checkProvider(c, 'login', { issuer, clientId: plain.clientId ?? '', clientSecret: plain.clientSecret, scopes, label: issuer }, identity)] : [];
  const names = providers.map((p) => p.issuer);
  if (new Set(names).size !== names.length) c.problem('login.providers', 'names an issuer more than once');
  for (const [key, p] of [['login.callbackPath', callbackPath], ['login.logoutPath', logoutPath], ['login.backchannelLogoutPath', backchannelLogoutPath], ['login.signInPath', signInPath], ['login.mePath', mePath]] as const) {
    if (!PATH.test(p)) c.problem(key, 'must be an absolute path of plain segments, e.g. /auth/callback');
    else if (p.toLowerCase().startsWith('/v1/tokens')) c.problem(key, 'must not be under /v1/tokens');
  }
  const paths = [callbackPath, logoutPath, backchannelLogoutPath, signInPath, mePath];
  if (new Set(paths.slice(0, 3)).size !== 3) c.problem('login', 'callbackPath, logoutPath and backchannelLogoutPath must differ');
  else if ([...paths.slice(0, 3), mePath].some((p) => p === signInPath || p.startsWith(`${signInPath}/`))) c.problem('login.signInPath', 'must differ from callbackPath, logoutPath, backchannelLogoutPath and mePath (and be no prefix of them: its stylesheet is under it)');
  else if (paths.slice(0, 3).includes(mePath)) c.problem('login.mePath', 'must differ from callbackPath, logoutPath and backchannelLogoutPath');
  if (forwardAuth?.path && paths.includes(forwardAuth.path)) c.problem('forwardAuth.path', 'must not be one of the login paths');
  routes.forEach((r, i) => {
    if (!r.path) return;
    for (const p of paths) {
      if (p === r.path || p.toLowerCase().startsWith(`${r.path.toLowerCase()}/`)) c.problem(`routes[${i}].path`, `covers ${p}, which the gateway serves itself (login)`);
    }
  });
  if (!COOKIE_NAME.test(cookieName)) c.problem('login.cookieName', 'must be a cookie name (letters, digits and !#$%&\'*+.^_`|~-)');
  let publicUrl: string | undefined;
  if (l.publicUrl !== undefined && l.publicUrl !== null && l.publicUrl !== '') {
    publicUrl = c.url('login.publicUrl', l.publicUrl, ['https:', 'http:']);
    if (publicUrl && URL.canParse(publicUrl)) {
      const u = new URL(publicUrl);
      if (u.protocol === 'http:' && !isLoopback(u.hostname)) c.problem('login.publicUrl', 'must be https:// (http:// only on a loopback address, for tests: the __Host- cookie needs a secure origin)');
      if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash || u.username || u.password) c.problem('login.publicUrl', 'must be an origin only: scheme://host[:port], no path, query or credentials');
      publicUrl = u.origin;
    }
  }
  const postLogoutRedirectUri = readPostLogout(c, l.postLogoutRedirectUri, plain.local ? signInPath : '/');
  const page = readPage(c, l.page, at);
  return { ...plain, scopes, publicUrl, postLogoutRedirectUri, page, providers };
}

function readScopes(c: Checker, key: string, raw: unknown): string[] {
  const scopes = raw === undefined || raw === null
    ? [...(setting('login.scopes').default as readonly string[])]
    : c.list(key, raw).map((s, i) => c.str(`${key}[${i}]`, s));
  if (!scopes.includes('openid')) c.problem(key, 'must include openid (the ID token is what proves the user)');
  return scopes;
}

/** One entry of `login.providers`. */
function readProvider(c: Checker, key: string, p: Record<string, unknown>, identity: IdentityConfig): LoginProviderConfig {
  c.unknownKeys(key, p, childrenOf('login.providers[]'));
  const issuer = p.issuer === undefined || p.issuer === null || p.issuer === '' ? '' : c.str(`${key}.issuer`, p.issuer);
  if (issuer === '') c.problem(`${key}.issuer`, 'is required');
  const clientId = p.clientId === undefined || p.clientId === null || p.clientId === '' ? '' : c.str(`${key}.clientId`, p.clientId);
  if (clientId === '') c.problem(`${key}.clientId`, 'is required');
  const clientSecret = p.clientSecret === undefined || p.clientSecret === null || p.clientSecret === '' ? undefined : c.str(`${key}.clientSecret`, p.clientSecret);
  const label = p.label === undefined || p.label === null || p.label === '' ? issuer : c.str(`${key}.label`, p.label);
  return checkProvider(c, key, { issuer, clientId, clientSecret, scopes: readScopes(c, `${key}.scopes`, p.scopes), label }, identity);
}

/** A provider's issuer must be an identity.issuers entry; its client id should not be one of that entry's audiences. */
function checkProvider(c: Checker, key: string, provider: LoginProviderConfig, identity: IdentityConfig): LoginProviderConfig {
  const entry = identity.issuers.findIndex((i) => i.name === provider.issuer);
  if (provider.issuer && entry < 0) {
    c.problem(`${key}.issuer`, `names no identity.issuers entry (known: ${identity.issuers.map((i) => i.name).join(', ') || 'none'})`);
  }
  if (entry >= 0 && provider.clientId && identity.issuers[entry]!.audiences.includes(provider.clientId)) {
    // An ID token's aud is the client id: listed, the provider's ID tokens of sign-in pass as bearer
    // tokens (unless they carry azp, which the bearer check refuses when it is one of the audiences).
    c.warning(`identity.issuers[${entry}].audiences`, `lists ${key}.clientId (${provider.clientId}): the ID tokens of sign-in would pass as bearer tokens; list the aud of the provider's access tokens for the gateway instead`);
  }
  return provider;
}

/** `login.postLogoutRedirectUri`: an absolute http(s) URL kept exactly as written (the provider compares it so), or a path. */
function readPostLogout(c: Checker, raw: unknown, fallback: string): string {
  if (raw === undefined || raw === null || raw === '') return fallback;
  const value = c.str('login.postLogoutRedirectUri', raw);
  if (value.startsWith('/')) {
    if (value.startsWith('//') || /[\\\s]/.test(value)) c.problem('login.postLogoutRedirectUri', 'a path must start with a single / and hold no backslash or space');
    return value;
  }
  if (!URL.canParse(value) || !['https:', 'http:'].includes(new URL(value).protocol)) {
    c.problem('login.postLogoutRedirectUri', 'must be an absolute http(s) URL or a path starting with /');
  }
  return value;
}

/** `login.page`: title, logo, templates folder. */
function readPage(c: Checker, raw: unknown, at: (path: string) => string): LoginPageConfig {
  const p = raw === undefined || raw === null ? {} : c.obj('login.page', raw);
  c.unknownKeys('login.page', p, childrenOf('login.page'));
  const plain = readScalars(c, 'login.page', p, { at });
  let logoUrl: string | undefined;
  if (p.logoUrl !== undefined && p.logoUrl !== null && p.logoUrl !== '') {
    const text = c.str('login.page.logoUrl', p.logoUrl);
    if (text.startsWith('/') && !text.startsWith('//')) logoUrl = text;
    else logoUrl = c.url('login.page.logoUrl', text, ['https:']);
  }
  return { ...plain, logoUrl, templatesDir: plain.templatesDir };
}
