import { createServer, type Server, type ServerResponse } from 'node:http';
import Koa from 'koa';
import { authenticate } from './auth/authenticate.js';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config/types.js';
import { Credentials } from './credentials/credentials.js';
import { Lockout } from './credentials/lockout.js';
import { PasswordCheck } from './credentials/password-check.js';
import { accessLog } from './http/access-log.js';
import { clientErrorResponder } from './http/client-error.js';
import { cors } from './http/cors.js';
import { errorHandler } from './http/errors.js';
import { health } from './http/health.js';
import { canonicalPath } from './http/normalize-path.js';
import { requestId } from './http/request-id.js';
import { HttpProblem } from './http/problem.js';
import type { GatewayState } from './http/state.js';
import { silentLogger, type Logger } from './log.js';
import { Forwarder } from './proxy/forward.js';
import { forwardToUpstream, matchRoute } from './proxy/gateway-routes.js';
import { rateLimit } from './proxy/rate-limit.js';
import { RouteTable } from './proxy/route-table.js';
import { WebSocketProxy } from './proxy/websocket.js';
import { AccessTokenCodec } from './tokens/access-token.js';
import { loadKeys } from './tokens/keys.js';
import { tokenRoutes } from './tokens/routes.js';
import { TokenService } from './tokens/service.js';
import { createStore } from './tokens/store/create.js';
import type { TokenStore } from './tokens/store/types.js';

export interface GatewayDeps {
  clock?: Clock;
  log?: Logger;
  /** A store made by the caller (tests); otherwise built from config.store and closed with the gateway. */
  store?: TokenStore;
}

export interface Gateway {
  app: Koa<GatewayState>;
  server: Server;
  store: TokenStore;
  tokens: TokenService;
  credentials: Credentials;
  /** Listens on config.server (or the given port); resolves with the bound port. */
  listen(port?: number, host?: string): Promise<number>;
  /** Stops accepting, lets in-flight requests finish within graceMs, then closes everything. */
  close(graceMs?: number): Promise<void>;
}

/** The composition root: the request's path through the gateway, in order. Nothing else wires. */
export function createGateway(config: Config, deps: GatewayDeps = {}): Gateway {
  const clock = deps.clock ?? systemClock;
  const log = deps.log ?? silentLogger;
  const store = deps.store ?? createStore(config.store, clock, log);
  const ownsStore = deps.store === undefined;

  const keys = loadKeys(config.tokens);
  const credentials = new Credentials(config.users, clock, log);
  const passwords = new PasswordCheck(credentials.verifier, new Lockout(store, config.lockout, log));
  const codec = new AccessTokenCodec(keys, {
    issuer: config.tokens.issuer,
    audience: config.tokens.audience,
    ttlSeconds: config.tokens.accessTtlSeconds,
  }, clock);
  const credentialVersion = (user: string) => credentials.verifier.credentialVersion(user);
  const tokens = new TokenService(codec, store, passwords, credentialVersion, {
    accessTtlSeconds: config.tokens.accessTtlSeconds,
    refreshTtlSeconds: config.tokens.refreshTtlSeconds,
    refreshReuseGraceSeconds: config.tokens.refreshReuseGraceSeconds,
  }, clock);
  const forwarder = new Forwarder(config.upstreams, log);
  const routes = new RouteTable(config.routes, config.upstreams, config.rateLimit);

  const app = new Koa<GatewayState>({ proxy: config.server.trustProxy > 0, maxIpsCount: config.server.trustProxy });
  app.silent = true;
  app.use(requestId());
  if (config.log.access) app.use(accessLog(log));
  app.use(errorHandler(log));
  app.use(canonicalPath());
  app.use(health(() => store.ping()));
  app.use(cors(routes, config.tokens.cors));
  app.use(underPrefix('/v1/tokens', tokenRoutes(tokens).routes(), notATokenEndpoint));
  app.use(authenticate(passwords, tokens));
  app.use(matchRoute(routes));
  app.use(rateLimit(store, log));
  app.use(forwardToUpstream(forwarder, config.server.trustProxy > 0));

  const server = createServer(app.callback());
  server.on('clientError', clientErrorResponder(log));
  const websockets = new WebSocketProxy(config, { server, app, passwords, tokens, store, routes, credentialVersion, log });
  server.on('upgrade', websockets.upgrade);

  return {
    app, server, store, tokens, credentials,
    listen: (port = config.server.port, host = config.server.host) => listen(server, port, host),
    close: async (graceMs = config.server.shutdownGraceMs) => {
      await Promise.all([closeServer(server, graceMs), websockets.close(graceMs)]);
      forwarder.close();
      credentials.close();
      if (ownsStore) await store.close();
    },
  };
}

/**
 * Runs `middleware` only for paths at or under `prefix`, so other requests skip the router's matching;
 * what it leaves unanswered there gets `fallback`, never the rest of the chain (no upstream behind it).
 */
function underPrefix<C>(prefix: string, middleware: Koa.Middleware<GatewayState, C>, fallback: () => never): Koa.Middleware<GatewayState> {
  return function scoped(ctx, next) {
    const p = ctx.path;
    const inside = p.startsWith(prefix) && (p.length === prefix.length || p[prefix.length] === '/');
    // The router adds its own context members (params, router) when it runs.
    return inside ? middleware(ctx as Parameters<typeof middleware>[0], async () => fallback()) : next();
  };
}

function notATokenEndpoint(): never {
  throw new HttpProblem(404, 'not_found', 'not a token endpoint (create, refresh, revoke)');
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    });
  });
}

/** Stops accepting; idle keep-alive connections close now, busy ones when done or after graceMs. */
function closeServer(server: Server, graceMs: number): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    force.unref();
    // From now on responses say Connection: close (the Forwarder reads res.shouldKeepAlive), and a
    // connection whose response is done closes at once: keep-alive clients neither hold the shutdown
    // open nor get cut at its end.
    server.on('request', (_req, res: ServerResponse) => {
      res.shouldKeepAlive = false;
    });
    const sweep = setInterval(() => server.closeIdleConnections(), 50);
    server.close(() => {
      clearTimeout(force);
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}
