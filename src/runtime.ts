import compose from 'koa-compose';
import type Koa from 'koa';
import { authenticate } from './auth/authenticate.js';
import type { Clock } from './clock.js';
import type { Config } from './config/types.js';
import { Credentials } from './credentials/credentials.js';
import { Lockout } from './credentials/lockout.js';
import { PasswordCheck } from './credentials/password-check.js';
import { endedUsers } from './credentials/password-verifier.js';
import { cors } from './http/cors.js';
import { health } from './http/health.js';
import { openApi } from './http/openapi.js';
import { HttpProblem } from './http/problem.js';
import { isTokenPath, requestForm } from './http/request-form.js';
import type { GatewayMiddleware, GatewayState } from './http/state.js';
import type { Logger } from './log.js';
import { Forwarder, type UpstreamErrorListener } from './proxy/forward.js';
import { forwardToUpstream, matchRoute } from './proxy/gateway-routes.js';
import { rateLimit } from './proxy/rate-limit.js';
import { RouteTable } from './proxy/route-table.js';
import { AccessTokenCodec } from './tokens/access-token.js';
import { loadKeys } from './tokens/keys.js';
import { tokenRoutes } from './tokens/routes.js';
import { TokenService } from './tokens/service.js';
import type { CounterStore } from './counters/types.js';
import { refreshKey } from './tokens/refresh-token.js';
import type { SessionStore } from './tokens/store/types.js';

/** What lives as long as the process, whatever the configuration says. */
export interface Shared {
  clock: Clock;
  log: Logger;
  /** The stores every part calls (timed for the metrics). */
  store: SessionStore;
  counters: CounterStore;
  ping: () => Promise<void>;
  onUpstreamError: UpstreamErrorListener;
}

/**
 * Everything built from one configuration: the route table, the upstream pools, the users, the keys,
 * the limits, and the chain of steps a request takes through them. A request picks up the runtime in
 * force when it arrives and finishes on it; a reload builds a new one beside it and swaps.
 */
export interface Runtime {
  config: Config;
  routes: RouteTable;
  forwarder: Forwarder;
  credentials: Credentials;
  lockout: Lockout;
  passwords: PasswordCheck;
  tokens: TokenService;
  /** request form ─ health ─ /openapi.json ─ CORS ─ /v1/tokens/* ─ authenticate ─ route ─ rate limit ─ paging ─ proxy */
  chain: Koa.Middleware<GatewayState>;
}

/**
 * Builds a runtime. With `previous`, parts whose configuration did not change are kept (the upstream
 * pools with their keep-alive connections and health, the users with their verified-password cache);
 * throws (and builds nothing that outlives the call) when the configuration cannot be served.
 */
export function buildRuntime(config: Config, shared: Shared, previous?: Runtime): Runtime {
  const { clock, log, store } = shared;
  const keys = loadKeys(config.tokens);
  const routes = new RouteTable(config.routes, config.upstreams, config.rateLimit);
  const sameUsers = previous !== undefined && same(previous.config.users, config.users);
  const ended = (users: string[]) => void endSessions(store, users, log);
  const credentials = sameUsers ? previous.credentials : new Credentials(config.users, clock, log, ended);
  if (sameUsers) credentials.reload();
  // Another users file: who was in the old one and is gone or changed in the new one ends too.
  else if (previous) ended(endedUsers(previous.credentials.verifier.table, credentials.verifier.table));
  const forwarder = previous !== undefined && same(previous.config.upstreams, config.upstreams)
    ? previous.forwarder
    : new Forwarder(config.upstreams, log, shared.onUpstreamError);
  const lockout = new Lockout(shared.counters, config.lockout, log);
  // An address that failed stays one-at-a-time until its throttle's bucket could have refilled its burst.
  const narrowForMs = Math.ceil((config.lockout.addressBurst * 60_000) / config.lockout.addressFailuresPerMinute);
  const passwords = new PasswordCheck(credentials.verifier, lockout, { addressBurst: config.lockout.addressBurst, narrowForMs });
  const codec = new AccessTokenCodec(keys, {
    issuer: config.tokens.issuer,
    audience: config.tokens.audience,
    ttlSeconds: config.tokens.accessTtlSeconds,
  }, clock);
  const tokens = new TokenService(codec, store, passwords, (user) => credentials.verifier.credentialVersion(user), {
    accessTtlSeconds: config.tokens.accessTtlSeconds,
    refreshTtlSeconds: config.tokens.refreshTtlSeconds,
    refreshReuseGraceSeconds: config.tokens.refreshReuseGraceSeconds,
    refreshKey: refreshKey(config.tokens.refreshSecret, keys.signing.key),
  }, clock);
  const chain = compose<Koa.ParameterizedContext<GatewayState>>([
    requestForm(),
    health(shared.ping),
    openApi(config),
    cors(routes, config.tokens.cors),
    onTokenPaths(tokenRoutes(tokens, config.server.bodyTimeoutMs).routes(), notATokenEndpoint),
    authenticate(passwords, tokens),
    matchRoute(routes),
    rateLimit(shared.counters),
    forwardToUpstream(forwarder, config.server.trustProxy > 0),
  ]);
  return { config, routes, forwarder, credentials, lockout, passwords, tokens, chain };
}

/**
 * Revokes every session of users whose htpasswd line was removed or changed (on every instance, as any
 * revocation). Each instance that reads the change does it; doing it twice is harmless. A store that
 * cannot answer now leaves the sessions to the credential check, which refuses them while the line stays
 * changed or gone; it is logged.
 */
async function endSessions(store: SessionStore, users: string[], log: Logger): Promise<void> {
  for (const user of users) {
    try {
      const revoked = await store.revokeUser(user);
      log.info('sessions of a removed or changed user revoked', { user, sessions: revoked });
    } catch (err) {
      log.error('sessions of a removed or changed user not revoked; its tokens stay refused while its line is gone or changed', { user, error: (err as Error).message });
    }
  }
}

/** Lets go of what a replaced runtime held and the new one does not share, once its requests are done. */
export function retireRuntime(old: Runtime, current: Runtime): void {
  if (old.forwarder !== current.forwarder) old.forwarder.retire();
  if (old.credentials !== current.credentials) old.credentials.close();
}

/** Settings a running process cannot take over: listen address, TLS files, store, admin listener, log level. */
export function restartOnlyChanges(old: Config, next: Config): string[] {
  const changed: string[] = [];
  if (old.server.host !== next.server.host || old.server.port !== next.server.port) changed.push('server.host/server.port');
  if (!same(old.server.tls, next.server.tls)) changed.push('server.tls');
  if (!same(old.store, next.store)) changed.push('store');
  if (!same(old.admin, next.admin)) changed.push('admin');
  if (old.log.level !== next.log.level) changed.push('log.level');
  if (old.server.workers !== next.server.workers) changed.push('server.workers');
  return changed;
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Runs `middleware` only for token paths (see isTokenPath), so other requests skip the router's
 * matching; what it leaves unanswered there gets `fallback`, never the rest of the chain.
 */
function onTokenPaths<C>(middleware: Koa.Middleware<GatewayState, C>, fallback: () => never): GatewayMiddleware {
  return function scoped(ctx, next) {
    // The router adds its own context members (params, router) when it runs.
    return isTokenPath(ctx.path) ? middleware(ctx as Parameters<typeof middleware>[0], async () => fallback()) : next();
  };
}

function notATokenEndpoint(): never {
  throw new HttpProblem(404, 'not_found', 'not a token endpoint (create, refresh, revoke)');
}
