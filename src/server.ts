import { createServer, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import Koa from 'koa';
import { createMetrics, type Metrics } from './admin/metrics.js';
import { requestMetrics } from './admin/request-metrics.js';
import { createAdminServer } from './admin/server.js';
import { instrumentStore } from './admin/store-metrics.js';
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
import { handleExpectations } from './http/expect.js';
import { health } from './http/health.js';
import { openApi } from './http/openapi.js';
import { isTokenPath, requestForm } from './http/request-form.js';
import { readTlsOptions, watchCertificate } from './http/tls.js';
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
  /** The registry to count in (tests read it); otherwise a new one per gateway. */
  metrics?: Metrics;
}

export interface Gateway {
  app: Koa<GatewayState>;
  server: Server | HttpsServer;
  /** The admin listener (/metrics, /healthz, /readyz); undefined when config.admin is false. */
  admin: Server | undefined;
  metrics: Metrics;
  store: TokenStore;
  tokens: TokenService;
  credentials: Credentials;
  lockout: Lockout;
  /** Listens on config.server (or the given port); resolves with the bound port. */
  listen(port?: number, host?: string): Promise<number>;
  /** Starts the admin listener on config.admin (or the given port); resolves with the bound port. */
  listenAdmin(port?: number, host?: string): Promise<number>;
  /** Stops accepting, lets in-flight requests finish within graceMs, then closes everything. */
  close(graceMs?: number): Promise<void>;
}

/** The composition root: the request's path through the gateway, in order. Nothing else wires. */
export function createGateway(config: Config, deps: GatewayDeps = {}): Gateway {
  // Read first: a broken certificate stops the start before anything is opened.
  const tls = config.server.tls;
  const tlsOptions = tls ? readTlsOptions(tls) : {};
  const clock = deps.clock ?? systemClock;
  const log = deps.log ?? silentLogger;
  const store = deps.store ?? createStore(config.store, clock, log);
  const ownsStore = deps.store === undefined;
  const metrics = deps.metrics ?? createMetrics();
  // What the gateway's parts call: the store with each command timed (gateway.store stays the real one).
  const timedStore = instrumentStore(store, metrics);
  const ping = () => timedStore.ping();

  const keys = loadKeys(config.tokens);
  const credentials = new Credentials(config.users, clock, log);
  const lockout = new Lockout(timedStore, config.lockout, log);
  const passwords = new PasswordCheck(credentials.verifier, lockout);
  const codec = new AccessTokenCodec(keys, {
    issuer: config.tokens.issuer,
    audience: config.tokens.audience,
    ttlSeconds: config.tokens.accessTtlSeconds,
  }, clock);
  const credentialVersion = (user: string) => credentials.verifier.credentialVersion(user);
  const tokens = new TokenService(codec, timedStore, passwords, credentialVersion, {
    accessTtlSeconds: config.tokens.accessTtlSeconds,
    refreshTtlSeconds: config.tokens.refreshTtlSeconds,
    refreshReuseGraceSeconds: config.tokens.refreshReuseGraceSeconds,
  }, clock);
  const forwarder = new Forwarder(config.upstreams, log, (upstream, kind) => metrics.upstreamErrors.inc({ upstream, kind }));
  const routes = new RouteTable(config.routes, config.upstreams, config.rateLimit);

  const app = new Koa<GatewayState>({ proxy: config.server.trustProxy > 0, maxIpsCount: config.server.trustProxy });
  app.silent = true;
  app.use(requestId());
  app.use(requestMetrics(metrics, (path) => routes.match(path)?.path));
  if (config.log.access) app.use(accessLog(log));
  app.use(errorHandler(log));
  app.use(requestForm());
  app.use(health(ping));
  app.use(openApi(config));
  app.use(cors(routes, config.tokens.cors));
  app.use(onTokenPaths(tokenRoutes(tokens, config.server.bodyTimeoutMs).routes(), notATokenEndpoint));
  app.use(authenticate(passwords, tokens));
  app.use(matchRoute(routes));
  app.use(rateLimit(timedStore, log));
  app.use(forwardToUpstream(forwarder, config.server.trustProxy > 0));

  const handle = app.callback();
  const serverOptions = {
    // Headers must arrive in time; bodies are judged by the idle limit of their route (a slow but
    // steady upload passes) or, on token endpoints, by server.bodyTimeoutMs: no total request limit.
    headersTimeout: config.server.headersTimeoutMs,
    requestTimeout: 0,
    connectionsCheckingInterval: Math.min(1000, config.server.headersTimeoutMs),
    // A missing Host gets a problem body from requestForm, not Node's bare 400.
    requireHostHeader: false,
  };
  const server = tls ? createHttpsServer({ ...serverOptions, ...tlsOptions }, handle) : createServer(serverOptions, handle);
  const stopWatchingCertificate = tls ? watchCertificate(server as HttpsServer, tls, log) : () => {};
  server.on('clientError', clientErrorResponder(log));
  handleExpectations(server, handle);
  metrics.watch({ storePing: ping, bcryptPending: () => credentials.verifier.pendingVerifications });
  const admin = config.admin === false ? undefined : createAdminServer(metrics, ping, log);
  const adminConfig = config.admin;
  const websockets = new WebSocketProxy(config, {
    server, app, passwords, tokens, store, routes, credentialVersion, log,
    countTunnel: (upstream, delta) => metrics.webSocketTunnels.inc({ upstream }, delta),
  });
  server.on('upgrade', websockets.upgrade);

  return {
    app, server, admin, metrics, store, tokens, credentials, lockout,
    listen: (port = config.server.port, host = config.server.host) => listen(server, port, host),
    listenAdmin: (port, host) => {
      if (!admin || adminConfig === false) return Promise.reject(new Error('the admin listener is off (admin: false)'));
      metrics.collectProcessMetrics();
      return listen(admin, port ?? adminConfig.port, host ?? adminConfig.host);
    },
    close: async (graceMs = config.server.shutdownGraceMs) => {
      stopWatchingCertificate();
      await Promise.all([closeServer(server, graceMs), admin ? closeServer(admin, graceMs) : undefined, websockets.close(graceMs)]);
      forwarder.close();
      credentials.close();
      if (ownsStore) await store.close();
    },
  };
}

/**
 * Runs `middleware` only for token paths (see isTokenPath), so other requests skip the router's
 * matching; what it leaves unanswered there gets `fallback`, never the rest of the chain.
 */
function onTokenPaths<C>(middleware: Koa.Middleware<GatewayState, C>, fallback: () => never): Koa.Middleware<GatewayState> {
  return function scoped(ctx, next) {
    // The router adds its own context members (params, router) when it runs.
    return isTokenPath(ctx.path) ? middleware(ctx as Parameters<typeof middleware>[0], async () => fallback()) : next();
  };
}

function notATokenEndpoint(): never {
  throw new HttpProblem(404, 'not_found', 'not a token endpoint (create, refresh, revoke)');
}

function listen(server: Server | HttpsServer, port: number, host: string): Promise<number> {
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
function closeServer(server: Server | HttpsServer, graceMs: number): Promise<void> {
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
