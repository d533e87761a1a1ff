import { LOGIN_STATE_TTL_S, safeReturnPath, type LoginFlow } from '../auth/login.js';
import { cookieValue } from '../auth/seal.js';
import { clientHost, clientScheme } from '../core/headers.js';
import { HttpProblem } from '../core/problem.js';
import type { OwnHandler } from '../http/cors.js';
import { readLimited } from '../http/json-body.js';
import type { GatewayContext, GatewayExchange } from '../http/state.js';
import type { RouteTable } from '../routes/route-table.js';
import type { Step } from './step.js';

const READ = new Set(['GET', 'HEAD']);
const LOGOUT_METHODS = new Set(['GET', 'POST']);
const POST = new Set(['POST']);
/** A logout token is a JWT of a few KiB. */
const MAX_FORM_BYTES = 16 * 1024;

/** The sign-in endpoints as own endpoints (callback, logout, back-channel logout). */
export function signInEndpoints(flow: LoginFlow, trustForwarded: boolean, bodyTimeoutMs: number): Array<[string, { methods: ReadonlySet<string>; handler: OwnHandler }]> {
  const { callbackPath, logoutPath, backchannelLogoutPath } = flow.config;
  return [
    [callbackPath, { methods: READ, handler: callback(flow, trustForwarded) }],
    [logoutPath, { methods: LOGOUT_METHODS, handler: logout(flow) }],
    [backchannelLogoutPath, { methods: POST, handler: backchannelLogout(flow, bodyTimeoutMs) }],
  ];
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
      (err as HttpProblem).headers.Location = `${originOf(ex, flow, trustForwarded)}${flow.config.callbackPath}?rd=${encodeURIComponent(target)}`;
      throw err;
    }
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

function wantsSignIn(ex: GatewayExchange, err: unknown, routes: RouteTable): boolean {
  if (!(err instanceof HttpProblem) || err.status !== 401 || ex.principal !== undefined || ex.handOff === 'tunnel') return false;
  if (!READ.has(ex.method)) return false;
  const accept = ex.req.headers.accept;
  if (accept === undefined || !accept.toLowerCase().includes('text/html')) return false;
  return routes.match(ex.path)?.login === true;
}

/** 302 to the provider's authorization endpoint, the sign-in's state in a short-lived sealed cookie. */
async function startSignIn(ctx: GatewayContext, flow: LoginFlow, trustForwarded: boolean, returnTo: string): Promise<void> {
  const { location, cookieName, sealed } = await flow.begin(originOf(ctx.state, flow, trustForwarded), returnTo);
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
      await startSignIn(ctx, flow, trustForwarded, safeReturnPath(query.get('rd') ?? '/'));
      return;
    }
    const stateCookie = flow.stateCookieName(query.get('state') ?? '');
    const { cookie: session, returnTo } = await flow.complete(ctx.state.query, cookieValue(ctx.req.headers.cookie, stateCookie));
    ctx.set('Set-Cookie', [cookie(flow.cookieName, session, flow.config.sessionTtlSeconds), cookie(stateCookie, '', 0)]);
    noStoreRedirect(ctx, returnTo);
  };
}

/** GET or POST logoutPath: the session ends everywhere, the cookie is cleared, then the provider's end-session page. */
function logout(flow: LoginFlow): OwnHandler {
  return async (ctx) => {
    const location = await flow.end(cookieValue(ctx.req.headers.cookie, flow.cookieName));
    ctx.set('Set-Cookie', cookie(flow.cookieName, '', 0));
    noStoreRedirect(ctx, location);
  };
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
