import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import Koa from 'koa';
import { createMetrics, type KnownNames, type Metrics } from './admin/metrics.js';
import { requestCounter } from './admin/request-metrics.js';
import { createAdminServer } from './admin/admin-server.js';
import { adminApi } from './admin/api.js';
import { instrumentStore } from './admin/store-metrics.js';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config/types.js';
import type { Credentials } from './credentials/credentials.js';
import type { Lockout } from './credentials/lockout.js';
import { clientErrorResponder } from './http/client-error.js';
import { Drain, pacedBy, type DrainPacing } from './http/drain.js';
import { handleExpectations } from './http/expect.js';
import { answerPlainHttp, keepClientCertificates, readTlsOptions, watchCertificate } from './http/tls.js';
import { createH2cListener, createHttp2Listener, entry } from './http/http2.js';
import type { Http2SecureServer } from 'node:http2';
import { ClientCertificates } from './auth/peer-certificates.js';
import { observe, type Observers } from './http/observe.js';
import { tracingSettings } from './tracing/settings.js';
import { packageVersion } from './tracing/version.js';
import { answerError } from './http/errors.js';
import { newExchange, type ExchangeTracer } from './core/exchange.js';
import type { OwnHandler } from './pipeline/own-endpoints.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RequestLanes } from './http/pipelining.js';
import type { GatewayState } from './http/state.js';
import { silentLogger, type Logger } from './log.js';
import { Tunnels } from './proxy/tunnels.js';
import { stillAllowed } from './pipeline/steps/allow.js';
import { acceptUpgrades } from './proxy/websocket.js';
import { buildRuntime, restartOnlyChanges, retireRuntime, type Shared } from './runtime.js';
import type { TokenService } from './tokens/service.js';
import { createCounters, createStore } from './stores/kinds.js';
import { storeCredentials } from './stores/credential-tables.js';
import type { ApiKeys } from './stores/tables/api-keys.js';
import type { StoreUsers } from './stores/tables/store-users.js';
import { refusedWrites } from './stores/redis/replication.js';
import type { SessionStore, StoreHealth } from './stores/sessions/session-store.js';
import type { CounterStore } from './stores/counters/counter-store.js';
import { holdTickShape } from './core/tick-shape.js';
import { installAsyncResourceBind } from './core/async-bind.js';

export interface GatewayDeps {
  clock?: Clock;
  log?: Logger;
  /** A store made by the caller (tests); otherwise built from config.store and closed with the gateway. */
  store?: SessionStore;
  /** Counters made by the caller (tests); otherwise built from config.store and closed with the gateway. */
  counters?: CounterStore;
  /** The registry to count in (tests read it); otherwise a new one per gateway. */
  metrics?: Metrics;
  /** The environment the OTEL_* variables are read from (tests); otherwise process.env. */
  env?: Record<string, string | undefined>;
}

export interface Gateway {
  app: Koa<GatewayState>;
  /** The public listener: HTTP, HTTPS, or (server.tls.http2) HTTPS with HTTP/2 and HTTP/1.1. */
  server: Server | HttpsServer | Http2SecureServer;
  /** The admin listener (/metrics, /healthz, /readyz); undefined when config.admin is false. */
  admin: Server | undefined;
  metrics: Metrics;
  store: SessionStore;
  counters: CounterStore;
  /** The API keys of the store (apiKeys at start); undefined: none. */
  readonly apiKeys: ApiKeys | undefined;
  /** The users kept in the store (users.store at start); undefined: none. */
  readonly storeUsers: StoreUsers | undefined;
  /** The /readyz check: resolves when ready, rejects with the 503 it answers (store down, shutting down). */
  readonly ready: () => Promise<void>;
  /** The parts of the configuration in force (they change with a reload). */
  readonly tokens: TokenService;
  readonly credentials: Credentials;
  readonly lockout: Lockout;
  readonly config: Config;
  /**
   * Takes a new configuration without a restart: routes, upstreams, users, keys, limits, CORS, log.access,
   * trustProxy, timeouts. Requests in flight finish on the configuration they started with. Throws (and
   * the old configuration stays in force) when the new one cannot be served. Returns the settings that
   * changed but need a restart to take effect.
   */
  reload(config: Config): { restartNeeded: string[] };
  /** Listens on config.server (or the given port); resolves with the bound port. */
  listen(port?: number, host?: string): Promise<number>;
  /** Starts the admin listener on config.admin (or the given port); resolves with the bound port. */
  listenAdmin(port?: number, host?: string): Promise<number>;
  /**
   * Drains (see Drain): /readyz answers 503 at once, connections are still accepted for acceptGraceMs
   * (default 0; or as a worker's primary paces it), then the listener closes, in-flight requests get graceMs
   * to finish, and every keep-alive connection closes after its answer. Then everything else is closed.
   */
  close(graceMs?: number, accept?: number | DrainPacing): Promise<void>;
}

/** The composition root: the request's path through the gateway, in order. Nothing else wires. */
export function createGateway(config: Config, deps: GatewayDeps = {}): Gateway {
  // Read first: a broken certificate stops the start before anything is opened.
  const tls = config.server.tls;
  const tlsOptions = tls ? readTlsOptions(tls) : {};
  // Client certificates (server.tls.clientCa): read once per connection, judged again after a CRL change.
  const clientCertificates = tls?.clientCa !== undefined ? new ClientCertificates(tls.userFrom) : undefined;
  clientCertificates?.useCrl(tlsOptions.crl as Buffer | undefined);
  // Node's nextTick entries keep their fast shape after the process idles (see holdTickShape).
  void holdTickShape();
  // Node 20's AsyncResource.bind, which its HTTP/2 client calls on every request, without its slow part.
  installAsyncResourceBind();
  const clock = deps.clock ?? systemClock;
  const log = deps.log ?? silentLogger;
  const store = deps.store ?? createStore(config.store, clock, log);
  const ownsStore = deps.store === undefined;
  const counters = deps.counters ?? createCounters(config.store, clock, log);
  const ownsCounters = deps.counters === undefined;
  // API keys (and users kept in the store) live in tables of the store, when configured at start.
  const tables = storeCredentials(config, clock, log);
  const metrics = deps.metrics ?? createMetrics();
  // What the gateway's parts call: the store with each command timed (gateway.store stays the real one).
  const timedStore = instrumentStore(store, metrics);
  // Readiness and the metrics' scrape see the store's health role only: its ping timed like any command,
  // its replication as last seen (no command, so not timed).
  const health: StoreHealth = store;
  const ping = () => timedStore.ping();
  // One request at a time per connection; a drain makes /readyz 503 and then closes connections between requests.
  const lanes = new RequestLanes(config.server.maxPipelinedRequests, (socket) => {
    metrics.pipeliningOverflows.inc();
    // The peer of the connection (behind a proxy, the proxy): the requests waiting are never handled.
    log.warn('connection closed: too many pipelined requests waiting', { peer: socket.remoteAddress, maxPipelinedRequests: lanes.maxWaiting });
  });
  const h2 = tls?.http2 ? createHttp2Listener(tlsOptions, {
    limits: config.server.http2,
    onFlood: (reason) => metrics.http2Floods.inc({ reason }),
    log,
  }) : undefined;
  // The h2c listener's connections (server.h2c) are made with the listener, below.
  const drain = new Drain(lanes, h2?.sessions ?? (!tls && config.server.h2c ? { goAwayAll: () => h2c?.sessions.goAwayAll(), destroyAll: () => h2c?.sessions.destroyAll() } : undefined));
  const readiness = drain.readiness(ping);
  const refused = () => refusedWrites(health.replication());

  // Open WebSocket tunnels outlive a reload; what ends them is read from the runtime in force.
  const tunnels = new Tunnels({
    onRevoked: (listener) => timedStore.onRevoked(listener),
    // The owner's source as configured now (a reload may have replaced it); one no longer configured: gone.
    recheck: (owner) => {
      const source = current.authenticators.find((a) => a.via === owner.via);
      return source ? source.recheck(owner) : 'credentials no longer accepted';
    },
    // A tunnel rides its connection: a client certificate revoked since ends it, whoever's credential opened it.
    connectionRefused: (client) => clientCertificates?.refusedConnection(client),
    stillAllowed: (owner, path) => stillAllowed(current.routes, current.allowGroups, owner, path),
  }, log, clock, config.log.access);
  // The gateway's own endpoints (tokens, health, /openapi.json, the JWK Set, preflights) are a Koa
  // application; its context's state is the request's exchange. Everything else never meets Koa.
  const app = new Koa<GatewayState>({ proxy: config.server.trustProxy > 0, maxIpsCount: config.server.trustProxy });
  app.silent = true;
  // The exchange and the handler the own-endpoint lookup found, for the request Koa is handed (cold path).
  const ownRequests = new WeakMap<IncomingMessage, { ex: GatewayState; handler: OwnHandler }>();
  app.use(async function serveOwnEndpoint(ctx) {
    const { ex, handler } = ownRequests.get(ctx.req)!;
    ctx.state = ex;
    try {
      await handler(ctx);
    } catch (err) {
      ctx.respond = false;
      answerError(ex, err, log);
    }
  });
  const koa = app.callback();

  const shared: Shared = {
    clock, log, store: timedStore, counters: instrumentStore(counters, metrics), ping: readiness, refused, tunnels, clientCertificates,
    onUpstreamError: (upstream, kind) => metrics.upstreamErrors.inc({ upstream, kind }),
    onKeyFetch: (issuer, result) => metrics.providerKeyFetches.inc({ issuer, result }),
    serveOwn: (ex, handler) => {
      ex.own = true;
      ex.stampId();
      ownRequests.set(ex.req, { ex, handler });
      return koa(ex.req, ex.res);
    },
  };
  if (tables.apiKeys) {
    shared.apiKeys = tables.apiKeys;
    // A key revoked or rotated: its open tunnels are judged again at once.
    tables.apiKeys.table.onChanged(() => tunnels.recheckNow());
  }
  if (tables.storeUsers) {
    shared.storeUsers = tables.storeUsers;
    // A user of the store removed or changed: open tunnels are judged again at once.
    tables.storeUsers.onChange(() => tunnels.recheckNow());
  }
  let current = buildRuntime(config, shared);
  metrics.known(knownNames(config));

  const observers: Observers = {
    count: requestCounter(metrics, (path) => current.routes.match(path)?.path),
    log,
    accessLog: () => current.config.log.access,
    tracer: undefined,
  };
  const serve = observe(observers, (ex) => current.handle(ex as GatewayState));
  // Tracing: the SDK is loaded only when it is on; listen() waits for it, so every request is traced.
  const tracing = startTracing(config, deps.env ?? process.env, metrics, log, (tracer) => (observers.tracer = tracer));
  // The rest of the way is the runtime's, picked up once: a reload mid-request does not change it.
  const serveOne = (req: IncomingMessage, res: ServerResponse) => {
    // Koa's default until an answer sets its own (a request cut before any answer is logged as 499: see observe).
    res.statusCode = 404;
    serve(newExchange(req, res, current.config.server.trustProxy));
  };
  // HTTP/1.1 requests one at a time per connection; HTTP/2 streams side by side (see http2.ts).
  const handle = h2 ? entry(serveOne, lanes.wrap(serveOne)) : lanes.wrap(serveOne);
  const serverOptions = {
    // Headers must arrive in time; bodies are judged by the idle limit of their route (a slow but
    // steady upload passes) or, on token endpoints, by server.bodyTimeoutMs: no total request limit.
    headersTimeout: config.server.headersTimeoutMs,
    requestTimeout: 0,
    connectionsCheckingInterval: Math.min(1000, config.server.headersTimeoutMs),
    // A missing Host gets a problem body from requestForm, not Node's bare 400.
    requireHostHeader: false,
  };
  // server.h2c: the plain listener's connections that start with the HTTP/2 preface are HTTP/2 (see createH2cListener).
  const plainH2 = !tls && config.server.h2c;
  const served = h2 || plainH2 ? entry(serveOne, lanes.wrap(serveOne)) : handle;
  const server: Server | HttpsServer | Http2SecureServer = h2 ? h2.server
    : tls ? createHttpsServer({ ...serverOptions, ...tlsOptions }, handle) : createServer(serverOptions, served);
  const h2c = plainH2 ? createH2cListener(server as Server, {
    limits: config.server.http2,
    onFlood: (reason) => metrics.http2Floods.inc({ reason }),
    log,
    firstBytesMs: config.server.headersTimeoutMs,
  }) : undefined;
  h2c?.h2c.on('request', served);
  if (h2) {
    // Node's HTTP/2 server takes the HTTP/1.1 settings as properties (its constructor sets its own).
    Object.assign(h2.server, serverOptions);
    h2.server.on('request', handle);
  }
  if (tls) answerPlainHttp(server as HttpsServer, config.server.headersTimeoutMs);
  if (clientCertificates) keepClientCertificates(server as HttpsServer);
  // A new CRL judges open connections at their next request, and open tunnels at once.
  const stopWatchingCertificate = tls ? watchCertificate(server as HttpsServer, tls, log, (options) => {
    if (!clientCertificates) return;
    clientCertificates.useCrl(options.crl as Buffer | undefined);
    tunnels.recheckNow();
  }, (failed) => metrics.tlsReloadFailing.set(failed ? 1 : 0)) : () => {};
  server.on('clientError', clientErrorResponder(log));
  handleExpectations(server as Server, handle);
  metrics.watch({ upstreamQueued: () => current.forwarder.queued(), openTunnels: () => tunnels.openByUpstream(), storePing: ping, bcryptPending: () => current.credentials.verifier.pendingVerifications, storeReplication: () => health.replication() });
  const adminToken = config.admin === false ? undefined : config.admin.apiToken;
  const api = adminToken === undefined ? undefined : {
    on: true,
    middleware: adminApi({
      token: adminToken, apiKeys: tables.apiKeys, apiKeysConfig: () => current.config.apiKeys, storeUsers: tables.storeUsers,
      endSessions: (user) => timedStore.revokeUser(user), fileUsers: () => new Set(current.credentials.fileUserNames()), log,
    }),
  };
  const admin = config.admin === false ? undefined : createAdminServer(metrics.registry, readiness, log, refused, api);
  const adminConfig = config.admin;
  // Upgrade requests (WebSocket handshakes, h2c offers) take the same way as any request.
  server.on('upgrade', acceptUpgrades(server as Server));

  return {
    app, server, admin, metrics, store, counters, ready: readiness, apiKeys: tables.apiKeys, storeUsers: tables.storeUsers,
    get tokens() {
      return current.tokens;
    },
    get credentials() {
      return current.credentials;
    },
    get lockout() {
      return current.lockout;
    },
    get config() {
      return current.config;
    },
    reload(next: Config) {
      const previous = current;
      const runtime = buildRuntime(next, shared, previous);
      current = runtime;
      metrics.known(knownNames(next));
      app.proxy = next.server.trustProxy > 0;
      app.maxIpsCount = next.server.trustProxy;
      (server as Server).headersTimeout = next.server.headersTimeoutMs;
      lanes.maxWaiting = next.server.maxPipelinedRequests;
      retireRuntime(previous, runtime);
      // Allow rules or groups may have changed: open tunnels are judged by the new ones now.
      tunnels.recheckNow();
      return { restartNeeded: restartOnlyChanges(config, next) };
    },
    listen: async (port = config.server.port, host = config.server.host) => {
      await tracing.ready;
      return listen(server, port, host);
    },
    listenAdmin: (port, host) => {
      if (!admin || adminConfig === false) return Promise.reject(new Error('the admin listener is off (admin: false)'));
      metrics.collectProcessMetrics();
      return listen(admin, port ?? adminConfig.port, host ?? adminConfig.host);
    },
    close: async (graceMs = current.config.server.shutdownGraceMs, accept: number | DrainPacing = 0) => {
      const pacing = typeof accept === 'number' ? pacedBy(accept) : accept;
      await drain.begin(pacing);
      stopWatchingCertificate();
      await Promise.all([drain.stopAccepting(server, graceMs, pacing), closeTunnels(tunnels, graceMs)]);
      if (admin) await closeAdmin(admin);
      current.forwarder.close();
      current.credentials.close();
      current.users.directory?.close();
      if (ownsStore) await store.close();
      if (ownsCounters) await counters.close();
      await tables.close();
      // The spans still queued are exported (within OTEL_BSP_EXPORT_TIMEOUT).
      await tracing.shutdown();
    },
  };
}

/**
 * Loads the tracing SDK when tracing is on (an endpoint in the environment or the configuration, and
 * OTEL_SDK_DISABLED not true) and hands its tracer over; off, nothing is imported. A tracer that
 * cannot load is logged and the gateway serves without it.
 */
function startTracing(
  config: Config, env: Record<string, string | undefined>, metrics: Metrics, log: Logger, use: (tracer: ExchangeTracer) => void,
): { ready: Promise<void>; shutdown: () => Promise<void> } {
  const settings = tracingSettings(config.tracing, env);
  if (settings === undefined) return { ready: Promise.resolve(), shutdown: () => Promise.resolve() };
  const loaded = import('./tracing/sdk.js').then((sdk) => {
    const tracer = sdk.createTracer(settings, packageVersion(), (reason, n) => metrics.tracingSpansDropped.inc({ reason }, n));
    use(tracer);
    log.info('tracing on', { endpoint: settings.url, protocol: settings.protocol, serviceName: settings.serviceName, sampler: settings.sampler, ratio: settings.ratio });
    return tracer;
  }, (err: unknown) => {
    log.error('tracing not started: the OpenTelemetry SDK did not load', { error: err instanceof Error ? err.message : String(err) });
    return undefined;
  });
  return {
    ready: loaded.then(() => {}),
    shutdown: async () => {
      await (await loaded)?.shutdown().catch(() => {});
    },
  };
}

/** The names of a configuration that label series (their counters start at 0). */
function knownNames(config: Config): KnownNames {
  return {
    upstreams: Object.keys(config.upstreams),
    issuers: config.identity.issuers.map((i) => i.name),
    routes: config.routes.map((r) => r.path),
  };
}

/** Refuses new handshakes, lets open tunnels run until graceMs, then ends them. */
async function closeTunnels(tunnels: Tunnels, graceMs: number): Promise<void> {
  await tunnels.drain(graceMs);
  tunnels.stop();
}

function listen(server: Server | HttpsServer | Http2SecureServer, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    });
  });
}

/** The admin listener closes at the end of a drain, its scrapes and probes cut (a scrape lost is retried). */
function closeAdmin(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
