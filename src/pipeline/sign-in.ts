import { deviceLabel } from '../auth/device-label.js';
import { FORM_TOKEN_TTL_S, LOGIN_STATE_TTL_S, safeReturnPath, type LoginFlow, type SigningInClient } from '../auth/login.js';
import { openSession } from '../auth/cookie-session.js';
import { cookieValue } from '../auth/seal.js';
import { DomainError, type DomainCode } from '../core/domain-error.js';
import { clientHost, clientScheme } from '../core/headers.js';
import { HttpProblem } from '../http/problem.js';
import type { PasswordCheck } from '../credentials/password-check.js';
import type { OwnHandler } from '../http/cors.js';
import { readLimited } from '../http/json-body.js';
import { toProblem } from '../http/errors.js';
import { Pages, type PageName, type View } from '../http/pages.js';
import type { GatewayContext, GatewayExchange } from '../http/state.js';
import type { RouteTable } from '../routes/route-table.js';
import type { Step } from './step.js';

const READ = new Set(['GET', 'HEAD']);
const PAGE_METHODS = new Set(['GET', 'HEAD', 'POST']);
const POST = new Set(['POST']);
/** A logout token is a JWT of a few KiB; a sign-in form is a name, a password, a token and a path. */
const MAX_FORM_BYTES = 16 * 1024;

/** What the pages need of the rest of the gateway. */
export interface LocalUsers {
  /** The same check as Basic and token create: lockout per user and per user+address, address lanes. */
  passwords: PasswordCheck;
  /** The user's credential version as a token session keeps it (its `uv`); undefined: no such user. */
  credentialVersion: (user: string) => string | undefined;
  /** The user's groups as allow rules read them (for a local session on the `me` page). */
  groupsOf: (user: string) => readonly string[];
  /** The gateway's own bearer token checked (signature, expiry, live session): its user and session. */
  bearer: (token: string) => Promise<{ user: string; sid: string }>;
}

/**
 * The sign-in endpoints as own endpoints: the callback, sign-out (GET: a page asking to confirm; POST:
 * the sign-out), back-channel logout (with a provider), the sign-in page (with login.local) and the
 * pages' stylesheet. The pages are rendered from the templates now (start, reload).
 */
export function signInEndpoints(flow: LoginFlow, trustForwarded: boolean, bodyTimeoutMs: number, local: LocalUsers): Array<[string, { methods: ReadonlySet<string>; handler: OwnHandler }]> {
  const { callbackPath, logoutPath, backchannelLogoutPath, signInPath } = flow.config;
  const pages = new Pages(flow.config.page);
  const site: Site = { flow, pages, trustForwarded, bodyTimeoutMs };
  const endpoints: Array<[string, { methods: ReadonlySet<string>; handler: OwnHandler }]> = [
    [callbackPath, { methods: READ, handler: callback(flow, trustForwarded) }],
    [logoutPath, { methods: PAGE_METHODS, handler: logout(site) }],
    [stylesheetPath(flow), { methods: READ, handler: stylesheet(pages) }],
    [flow.config.mePath, { methods: PAGE_METHODS, handler: me(site, local) }],
  ];
  if (flow.providers.length > 0) endpoints.push([backchannelLogoutPath, { methods: POST, handler: backchannelLogout(flow, bodyTimeoutMs) }]);
  if (flow.offersPage) endpoints.push([signInPath, { methods: PAGE_METHODS, handler: signInPage(site, local) }]);
  return endpoints;
}

/** What the page handlers share. */
interface Site {
  flow: LoginFlow;
  pages: Pages;
  trustForwarded: boolean;
  bodyTimeoutMs: number;
}

/** The one stylesheet of the pages, under the sign-in page's path. */
function stylesheetPath(flow: LoginFlow): string {
  return `${flow.config.signInPath}/style.css`;
}

/**
 * The pipeline with browser sign-in: a request that authenticate refused with 401 (no credentials, or
 * a session cookie that has ended) on a `login: true` route, when a browser navigates to it (GET or
 * HEAD, Accept naming text/html, not a WebSocket handshake), is sent to sign in: 302 to the provider
 * (a forward-auth answer keeps its 401 and gets a `Location` to the gateway's sign-in start, for the
 * proxy in front to redirect to). Every other request keeps its answer.
 */
export function withSignIn(run: Step, flow: LoginFlow, routes: RouteTable, trustForwarded: boolean, serveOwn: (ex: GatewayExchange, handler: OwnHandler) => Promise<void>): Step {
  const redirect = (ex: GatewayExchange, err: unknown): Promise<void> => {
    if (!wantsSignIn(ex, err, routes)) throw err;
    const target = safeReturnPath(ex.query === '' ? ex.path : `${ex.path}?${ex.query}`);
    if (ex.handOff === 'answer') {
      const problem = toProblem(err);
      problem.headers.Location = `${originOf(ex, flow, trustForwarded)}${flow.config.callbackPath}?rd=${encodeURIComponent(target)}`;
      throw problem;
    }
    // The gateway's own sign-in page (its users' form, or a choice of ways) rather than Basic's pop-up.
    if (flow.offersPage) return serveOwn(ex, async (ctx) => noStoreRedirect(ctx, signInPageUrl(flow, target)));
    return serveOwn(ex, (ctx) => startSignIn(ctx, flow, trustForwarded, target));
  };
  return function runWithSignIn(ex) {
    let pending: void | Promise<void>;
    try {
      pending = run(ex);
    } catch (err) {
      return redirect(ex, err);
    }
    return pending instanceof Promise ? pending.catch((err: unknown) => redirect(ex, err)) : pending;
  };
}

/**
 * The refusals of authenticate that send a browser to sign in: no credentials, credentials no source
 * takes, a provider's token refused, a browser session that ended. A wrong password (Basic's own prompt
 * asks again) and a refused token of the gateway's own keep their 401.
 */
const SIGN_IN_REFUSALS: ReadonlySet<DomainCode> = new Set<DomainCode>([
  'missing_credentials', 'credentials_not_accepted', 'malformed_bearer', 'invalid_provider_token', 'provider_token_expired', 'session_ended', 'session_expired',
]);

function wantsSignIn(ex: GatewayExchange, err: unknown, routes: RouteTable): boolean {
  if (!(err instanceof DomainError) || !SIGN_IN_REFUSALS.has(err.code) || ex.principal !== undefined || ex.handOff === 'tunnel') return false;
  if (!READ.has(ex.method)) return false;
  const accept = ex.req.headers.accept;
  if (accept === undefined || !accept.toLowerCase().includes('text/html')) return false;
  return routes.match(ex.path)?.login === true;
}

/** 302 to the provider's authorization endpoint, the sign-in's state in a short-lived sealed cookie. */
async function startSignIn(ctx: GatewayContext, flow: LoginFlow, trustForwarded: boolean, returnTo: string, provider?: string): Promise<void> {
  const { location, cookieName, sealed } = await flow.begin(originOf(ctx.state, flow, trustForwarded), returnTo, provider);
  ctx.set('Set-Cookie', cookie(cookieName, sealed, LOGIN_STATE_TTL_S));
  noStoreRedirect(ctx, location);
}

/**
 * GET callbackPath: with `code` or `error`, the provider's answer (see LoginFlow.complete): the session
 * cookie is set and the browser goes back where it was. Without them, `?rd=/path` starts a sign-in
 * (the Location of a forward-auth 401 points here).
 */
function callback(flow: LoginFlow, trustForwarded: boolean): OwnHandler {
  return async (ctx) => {
    const query = new URLSearchParams(ctx.state.query);
    if (!query.has('code') && !query.has('error') && !query.has('state')) {
      const returnTo = safeReturnPath(query.get('rd') ?? '/');
      // From the sign-in page's provider button, or where there is no page to choose on: the provider.
      if (flow.offersPage && !query.has('provider')) noStoreRedirect(ctx, signInPageUrl(flow, returnTo));
      else await startSignIn(ctx, flow, trustForwarded, returnTo, query.get('provider') ?? undefined);
      return;
    }
    const stateCookie = flow.stateCookieName(query.get('state') ?? '');
    const { cookie: session, returnTo } = await flow.complete(ctx.state.query, cookieValue(ctx.req.headers.cookie, stateCookie), signingInClient(ctx));
    ctx.set('Set-Cookie', [cookie(flow.cookieName, session, flow.config.sessionTtlSeconds), cookie(stateCookie, '', 0)]);
    noStoreRedirect(ctx, returnTo);
  };
}

/**
 * logoutPath. GET: a page asking to confirm, whose form posts here (a link or an image from another
 * site cannot sign anyone out). POST, from the gateway's own page (Origin and the form token): the
 * session ends everywhere, the cookie is cleared, then the provider's end-session page (with
 * post_logout_redirect_uri) or postLogoutRedirectUri.
 */
function logout(site: Site): OwnHandler {
  const { flow } = site;
  return async (ctx) => {
    const sessionCookie = cookieValue(ctx.req.headers.cookie, flow.cookieName);
    if (ctx.method !== 'POST') {
      const session = sessionCookie === undefined || sessionCookie === '' ? undefined : openSession(flow.sealer, sessionCookie);
      const { token, setCookie } = formToken(ctx, flow);
      await sendPage(ctx, site, 'sign-out', { action: flow.config.logoutPath, csrf: token, user: session?.user }, setCookie);
      return;
    }
    const form = await readForm(ctx, site);
    const verdict = flow.checkFormToken(form.get('csrf') ?? undefined, cookieValue(ctx.req.headers.cookie, flow.formCookieName));
    // An expired page: ask again (the session is not ended by a form nobody can tell came from here).
    if (verdict !== 'ok') throw crossSite('the sign-out form\'s token is missing, of another browser or expired: open the sign-out page again');
    const location = await flow.end(sessionCookie, originOf(ctx.state, flow, site.trustForwarded));
    ctx.set('Set-Cookie', cookie(flow.cookieName, '', 0));
    seeOther(ctx, location);
  };
}

/**
 * signInPath (login.local, or several ways to sign in). GET: the page, `rd` the same-origin path to go
 * back to. POST (the form, from the gateway's own page: Origin and the form token): the user name and
 * password are checked by PasswordCheck exactly as Basic's (lockout per user and per user+address, the
 * same answer for an unknown user and a wrong password); on success the store session and its cookie,
 * then 303 back. A browser is answered with the page again and what went wrong; any other client with
 * the problem (401, 429, 503).
 */
function signInPage(site: Site, local: LocalUsers): OwnHandler {
  const { flow } = site;
  return async (ctx) => {
    if (ctx.method !== 'POST') {
      const returnTo = safeReturnPath(new URLSearchParams(ctx.state.query).get('rd') ?? '/');
      await renderSignIn(ctx, site, { returnTo });
      return;
    }
    if (!flow.config.local) throw new HttpProblem(405, 'method_not_allowed', 'this gateway has no sign-in form of its own users (login.local)', { headers: { Allow: 'GET, HEAD' } });
    const form = await readForm(ctx, site);
    const returnTo = safeReturnPath(form.get('rd') ?? '/');
    const user = form.get('username') ?? '';
    const password = form.get('password') ?? '';
    const verdict = flow.checkFormToken(form.get('csrf') ?? undefined, cookieValue(ctx.req.headers.cookie, flow.formCookieName));
    if (verdict === 'forged') throw crossSite('the sign-in form\'s token is missing or of another browser: open the sign-in page again');
    if (verdict === 'expired') return refuse(ctx, site, { returnTo, user, failure: 'expired' }, new HttpProblem(403, 'forbidden', 'the sign-in form has expired: open the sign-in page again'));
    ctx.state.triedUser = user;
    try {
      if (user === '' || password === '') throw new DomainError('invalid_credentials', 'the user name or password is wrong');
      await local.passwords.check({ user, password, address: ctx.state.address }, { trustCache: false });
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      const failure = err.code === 'invalid_credentials' ? 'wrong' : err.code === 'too_many_attempts' ? 'locked' : 'unavailable';
      return refuse(ctx, site, { returnTo, user, failure, retryAfterSeconds: err.retryAfterSeconds }, err);
    }
    const uv = local.credentialVersion(user);
    // Removed between the check and now: as if the password were wrong.
    if (uv === undefined) return refuse(ctx, site, { returnTo, user, failure: 'wrong' }, new DomainError('invalid_credentials', 'the user name or password is wrong'));
    const session = await flow.signInLocal(user, uv, signingInClient(ctx));
    ctx.set('Set-Cookie', [cookie(flow.cookieName, session, flow.config.sessionTtlSeconds)]);
    seeOther(ctx, returnTo);
  };
}

/** The client signing in: its address (as the exchange knows it) and User-Agent. */
function signingInClient(ctx: GatewayContext): SigningInClient {
  return { address: ctx.state.address, userAgent: ctx.req.headers['user-agent'] };
}

/** Who asks for the `me` page: a browser session, or the gateway's own bearer token (JSON only). */
interface Asker {
  user: string;
  sid: string;
  groups: readonly string[];
  how: string;
  bearer: boolean;
}

/**
 * mePath. GET: who the signed-in person is (user, groups, how they signed in) and their sessions
 * (browser and token sessions: created, last refreshed, the address and device a browser signed in
 * from, else unknown), as a page or, with Accept naming
 * application/json, as JSON; a bearer token of the gateway gets the JSON of its own session. POST
 * (the page's forms: Origin and the form token), `end` = a session id or `others`: ends that session
 * of the user's (or all but this one) on every instance, then 303 back to the page. Without a session:
 * a browser goes to sign in, any other client gets 401.
 */
function me(site: Site, local: LocalUsers): OwnHandler {
  const { flow } = site;
  return async (ctx) => {
    const json = wantsJson(ctx);
    const asker = await askerOf(ctx, site, local);
    if (asker === undefined) {
      if (json || ctx.method === 'POST') throw new HttpProblem(401, 'missing_credentials', 'sign in first: this page is of a signed-in browser session (or a bearer token of the gateway)');
      noStoreRedirect(ctx, flow.offersPage ? signInPageUrl(flow, flow.config.mePath) : `${flow.config.callbackPath}?rd=${encodeURIComponent(flow.config.mePath)}`);
      return;
    }
    if (ctx.method === 'POST') {
      if (asker.bearer) throw new HttpProblem(403, 'forbidden', 'sessions are ended here from the page of a browser session; a token ends its own at POST /v1/tokens/revoke');
      const form = await readForm(ctx, site);
      const verdict = flow.checkFormToken(form.get('csrf') ?? undefined, cookieValue(ctx.req.headers.cookie, flow.formCookieName));
      if (verdict !== 'ok') throw crossSite('the form\'s token is missing, of another browser or expired: open the page again');
      const which = form.get('end') ?? '';
      if (which !== '') await flow.endSessionsOf(asker.user, which, asker.sid);
      seeOther(ctx, flow.config.mePath);
      return;
    }
    const all = await flow.sessionsOf(asker.user);
    const listed = asker.bearer ? all.filter((s) => s.sid === asker.sid) : all;
    const sessions = listed.map((s) => ({
      id: s.sid,
      createdAt: new Date(s.createdAtMs).toISOString(),
      lastRefreshedAt: new Date(s.refreshedAtMs).toISOString(),
      // Noted at a browser sign-in of this release; a token session or an older one: unknown.
      address: s.device?.address ?? 'unknown',
      device: s.device === undefined ? 'unknown' : deviceLabel(s.device.userAgent),
      current: s.sid === asker.sid,
    }));
    if (json) {
      ctx.set('Cache-Control', 'no-store');
      ctx.status = 200;
      ctx.body = { user: asker.user, groups: asker.groups, signedInWith: asker.how, sessions };
      return;
    }
    const { token, setCookie } = formToken(ctx, flow);
    await sendPage(ctx, site, 'me', {
      user: asker.user,
      groups: asker.groups.join(', '),
      how: asker.how,
      password: asker.how === 'password',
      csrf: token,
      action: flow.config.mePath,
      logoutAction: flow.config.logoutPath,
      sessions: sessions.map((s) => ({ ...s, createdAt: shortTime(s.createdAt), lastRefreshedAt: shortTime(s.lastRefreshedAt) })),
      others: sessions.some((s) => !s.current),
    }, setCookie);
  };
}

/** The session cookie's live session, else the gateway's own bearer token (Authorization), else undefined. */
async function askerOf(ctx: GatewayContext, site: Site, local: LocalUsers): Promise<Asker | undefined> {
  const { flow } = site;
  const authorization = ctx.req.headers.authorization;
  if (authorization !== undefined && /^bearer /i.test(authorization)) {
    let holder: { user: string; sid: string };
    try {
      holder = await local.bearer(authorization.slice(7).trim());
    } catch (err) {
      if (err instanceof DomainError || err instanceof HttpProblem) throw new HttpProblem(401, 'invalid_token', `the bearer token is not valid here: ${err.message}`);
      throw err;
    }
    return { user: holder.user, sid: holder.sid, groups: local.groupsOf(holder.user), how: 'token', bearer: true };
  }
  const session = await flow.liveSession(cookieValue(ctx.req.headers.cookie, flow.cookieName));
  if (session === undefined) return undefined;
  const groups = session.local ? local.groupsOf(session.user) : session.groups;
  return { user: session.user, sid: session.sid, groups, how: session.local ? 'password' : providerLabel(flow, session.p), bearer: false };
}

/** The label of the provider a session signed in at (a cookie of the last release names none: the one provider). */
function providerLabel(flow: LoginFlow, name: string | undefined): string {
  const provider = flow.providers.find((p) => p.name === name) ?? flow.providers[0];
  return provider?.config.label ?? 'an OpenID provider';
}

/** Accept names application/json (and not text/html before it). */
function wantsJson(ctx: GatewayContext): boolean {
  const accept = (ctx.req.headers.accept ?? '').toLowerCase();
  const json = accept.indexOf('application/json');
  const html = accept.indexOf('text/html');
  return json >= 0 && (html < 0 || json < html);
}

/** `2026-11-28T02:31:58.123Z` as `2026-11-28 02:31` (the templates say UTC). */
function shortTime(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)}`;
}

type Failure = 'wrong' | 'locked' | 'unavailable' | 'expired';

interface SignInView {
  returnTo: string;
  user?: string;
  failure?: Failure;
  retryAfterSeconds?: number;
}

/**
 * A refused sign-in form: a browser (Accept naming text/html) gets the page again, with what went wrong
 * (in the templates' words) and the user name kept; any other client the problem.
 */
function refuse(ctx: GatewayContext, site: Site, view: SignInView, err: unknown): Promise<void> {
  const accept = ctx.req.headers.accept;
  if (accept === undefined || !accept.toLowerCase().includes('text/html')) throw err;
  return renderSignIn(ctx, site, view);
}

function renderSignIn(ctx: GatewayContext, site: Site, view: SignInView): Promise<void> {
  const { flow } = site;
  const { token, setCookie } = formToken(ctx, flow);
  const providers = flow.providers.map((p) => ({ action: flow.config.callbackPath, name: p.name, label: p.config.label }));
  const failure: View | undefined = view.failure === undefined ? undefined : { [view.failure]: true, ...lockedUntil(site, view.retryAfterSeconds) };
  const page: View = {
    returnTo: view.returnTo,
    failure,
    providers,
    alsoProviders: providers.length > 0 && flow.config.local,
    local: flow.config.local ? { action: flow.config.signInPath, csrf: token, username: view.user ?? '' } : undefined,
  };
  return sendPage(ctx, site, 'sign-in', page, setCookie);
}

/** When a locked sign-in may be tried again: minutes from now (rounded up) and the UTC time. */
function lockedUntil(site: Site, seconds: number | undefined): View {
  if (seconds === undefined) return {};
  const at = new Date(site.flow.clock.now() + seconds * 1000);
  return { retryMinutes: Math.max(1, Math.ceil(seconds / 60)), retryAt: at.toISOString().slice(11, 16) };
}

/**
 * The form token of a page and, when the browser has no form cookie yet, the cookie to set: the token
 * is bound to that cookie's nonce (see LoginFlow.formToken).
 */
function formToken(ctx: GatewayContext, flow: LoginFlow): { token: string; setCookie: string | undefined } {
  const present = cookieValue(ctx.req.headers.cookie, flow.formCookieName);
  const nonce = present !== undefined && /^[A-Za-z0-9_-]{24}$/.test(present) ? present : flow.newFormNonce();
  return { token: flow.formToken(nonce), setCookie: nonce === present ? undefined : formCookie(flow.formCookieName, nonce) };
}

/** A page: no caching, no framing, no script (the Content-Security-Policy), HTML. */
async function sendPage(ctx: GatewayContext, site: Site, name: PageName, view: View, setCookie: string | undefined): Promise<void> {
  const html = site.pages.render(name, view, { stylesheet: stylesheetPath(site.flow) });
  const formTargets = await site.flow.formTargets();
  if (setCookie !== undefined) ctx.append('Set-Cookie', setCookie);
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Content-Security-Policy', site.pages.contentSecurityPolicy(formTargets));
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Referrer-Policy', 'same-origin');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.status = 200;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = html;
}

/** The pages' stylesheet (cached an hour: it changes only with the templates). */
function stylesheet(pages: Pages): OwnHandler {
  return async (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.status = 200;
    ctx.type = 'text/css; charset=utf-8';
    ctx.body = pages.stylesheet;
  };
}

/**
 * A form posted to one of the pages: only from the gateway's own origin (the Origin header, or without
 * one Sec-Fetch-Site: same-origin; else 403 before the body is read), form-encoded (else 415).
 */
async function readForm(ctx: GatewayContext, site: Site): Promise<URLSearchParams> {
  const origin = ctx.req.headers.origin;
  if (origin !== undefined && origin !== '') {
    if (origin !== originOf(ctx.state, site.flow, site.trustForwarded)) throw crossSite(`a form from ${origin} may not be posted here: only the gateway's own pages may`);
  } else if (ctx.req.headers['sec-fetch-site'] !== 'same-origin') {
    throw crossSite('a form posted here needs an Origin header (or Sec-Fetch-Site: same-origin): browsers send one, and it is how the gateway tells its own pages from another site\'s');
  }
  if (!ctx.is('application/x-www-form-urlencoded')) {
    throw new HttpProblem(415, 'unsupported_media_type', 'the form is posted as application/x-www-form-urlencoded');
  }
  const raw = await readLimited(ctx.req, MAX_FORM_BYTES, site.bodyTimeoutMs);
  return new URLSearchParams(raw.toString('utf8'));
}

function crossSite(detail: string): HttpProblem {
  return new HttpProblem(403, 'forbidden', detail);
}

/** The sign-in page, with where to go back to. */
function signInPageUrl(flow: LoginFlow, returnTo: string): string {
  return returnTo === '/' ? flow.config.signInPath : `${flow.config.signInPath}?rd=${encodeURIComponent(returnTo)}`;
}

/** POST backchannelLogoutPath, form-encoded `logout_token`: 200 once the sessions are revoked on every instance. */
function backchannelLogout(flow: LoginFlow, bodyTimeoutMs: number): OwnHandler {
  return async (ctx) => {
    if (!ctx.is('application/x-www-form-urlencoded')) {
      throw new HttpProblem(415, 'unsupported_media_type', 'a back-channel logout is a form (Content-Type: application/x-www-form-urlencoded) with a logout_token');
    }
    const raw = await readLimited(ctx.req, MAX_FORM_BYTES, bodyTimeoutMs);
    const form = new URLSearchParams(raw.toString('utf8'));
    if (form.getAll('logout_token').length > 1) throw new HttpProblem(400, 'invalid_request', 'logout_token is given more than once', { extensions: { error: 'invalid_request' } });
    await flow.backchannel(form.get('logout_token') ?? undefined);
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 200;
    ctx.body = '';
  };
}

/** After a form's POST: 303, so the browser GETs the next page. */
function seeOther(ctx: GatewayContext, location: string): void {
  noStoreRedirect(ctx, location);
  ctx.status = 303;
}

function noStoreRedirect(ctx: GatewayContext, location: string): void {
  ctx.set('Cache-Control', 'no-store');
  ctx.status = 302;
  ctx.set('Location', location);
  ctx.body = '';
}

/** A cookie of the sign-in: Secure, HttpOnly, SameSite=Lax, Path=/ (what a __Host- name requires). */
function cookie(name: string, value: string, maxAgeSeconds: number): string {
  return `${name}=${value}; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}`;
}

/**
 * The form cookie: HttpOnly, SameSite=Lax (another site's form post does not carry it), as long-lived as a
 * form token. Only a nonce: the tokens bound to it are sealed.
 */
function formCookie(name: string, nonce: string): string {
  return `${name}=${nonce}; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=${FORM_TOKEN_TTL_S}`;
}

/** The gateway's public origin: login.publicUrl, else the request's (a forward-auth call's described one). */
function originOf(ex: GatewayExchange, flow: LoginFlow, trustForwarded: boolean): string {
  if (flow.config.publicUrl) return flow.config.publicUrl;
  const req = ex.req;
  const described = ex.forwardAuth;
  const host = described?.host ?? clientHost(req, trustForwarded ? req.headers['x-forwarded-host'] : undefined);
  if (host === undefined) throw new HttpProblem(400, 'invalid_request', 'a sign-in needs the Host the browser addressed (or login.publicUrl)');
  const scheme = described?.proto ?? clientScheme(req, trustForwarded ? req.headers['x-forwarded-proto'] : undefined);
  return `${scheme}://${host}`;
}
