import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { OVERRIDE_HEADERS } from '../proxy/headers.js';
import { Checker } from './checker.js';
import { ConfigError } from './errors.js';
import type {
  AdminConfig, Config, CorsPolicy, LockoutConfig, PagingRules, RateLimitRule, RedisTopology, RouteConfig, ServerConfig,
  SigningKeyConfig, StoreConfig, Timeouts, TlsConfig, TokensConfig, UpstreamConfig, UsersConfig, VerificationKeyConfig,
} from './types.js';

export const DEFAULT_PAGE_SIZES = [10, 20, 50, 100, 200];
const SIXTY_DAYS = 60 * 24 * 3600;
const ALGS = ['HS256', 'RS256', 'ES256'] as const;
const MIN_SECRET_BYTES = 32;

/** Turns parsed YAML into a Config, or throws a ConfigError listing every problem. */
export function validateConfig(raw: unknown, file: string, baseDir: string): Config {
  const { config, problems } = checkConfig(raw, file, baseDir);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** The Config as far as it could be read (defaults where a key is bad), and every problem found. */
export function checkConfig(raw: unknown, file: string, baseDir: string): { config: Config; problems: string[] } {
  const c = new Checker();
  const root = c.obj('(root)', raw, true);
  c.unknownKeys('', root, ['server', 'store', 'users', 'tokens', 'lockout', 'rateLimit', 'upstreams', 'routes', 'log', 'admin']);
  const at = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));

  // Read in the order of the file, so problems are listed in that order too.
  const server = readServer(c, c.obj('server', root.server));
  if (root.server && typeof root.server === 'object') server.tls = readTls(c, (root.server as Record<string, unknown>).tls, at);
  const store = readStore(c, c.obj('store', root.store));
  if (server.workers > 1 && store.kind === 'memory') {
    c.problem('server.workers', 'needs store.kind redis: with the memory store each worker would have its own sessions');
  }
  const users = readUsers(c, c.obj('users', root.users, true), at);
  const tokens = readTokens(c, c.obj('tokens', root.tokens, true), at);
  const lockout = readLockout(c, c.obj('lockout', root.lockout));
  const rateLimit = root.rateLimit === undefined || root.rateLimit === null || root.rateLimit === false
    ? undefined : readRateLimit(c, 'rateLimit', c.obj('rateLimit', root.rateLimit));
  const upstreams = readUpstreams(c, root.upstreams);
  const routes = readRoutes(c, root.routes, upstreams);
  const log = readLog(c, c.obj('log', root.log));
  const admin = readAdmin(c, root.admin);
  const config: Config = { file, server, store, users, tokens, lockout, rateLimit, upstreams, routes, log, admin };
  return { config, problems: c.problems };
}

function readServer(c: Checker, s: Record<string, unknown>): ServerConfig {
  c.unknownKeys('server', s, ['host', 'port', 'trustProxy', 'shutdownGraceMs', 'acceptGraceMs', 'headersTimeoutMs', 'bodyTimeoutMs', 'tls', 'workers']);
  const trust = s.trustProxy;
  return {
    host: c.str('server.host', s.host, '0.0.0.0'),
    port: c.int('server.port', s.port, 8080, 0, 65535),
    trustProxy: trust === true || trust === 'true' ? 1 : trust === false || trust === 'false' ? 0 : c.int('server.trustProxy', trust, 0, 0, 32),
    shutdownGraceMs: c.int('server.shutdownGraceMs', s.shutdownGraceMs, 10_000, 0),
    acceptGraceMs: c.int('server.acceptGraceMs', s.acceptGraceMs, 5000, 0),
    headersTimeoutMs: c.int('server.headersTimeoutMs', s.headersTimeoutMs, 10_000, 100),
    bodyTimeoutMs: c.int('server.bodyTimeoutMs', s.bodyTimeoutMs, 10_000, 100),
    workers: s.workers === 'auto' ? availableParallelism() : c.int('server.workers', s.workers, 1, 1, 256),
  };
}

function readStore(c: Checker, s: Record<string, unknown>): StoreConfig {
  const kind = c.oneOf('store.kind', s.kind, ['memory', 'redis'], 'memory');
  if (kind === 'memory') {
    c.unknownKeys('store', s, ['kind']);
    return { kind };
  }
  c.unknownKeys('store', s, ['kind', 'url', 'cluster', 'sentinel', 'keyPrefix', 'commandTimeoutMs', 'connectTimeoutMs', 'livenessCacheMs', 'waitForReplicas']);
  const topology = readTopology(c, s);
  const keyPrefix = c.str('store.keyPrefix', s.keyPrefix, 'gw:');
  // A hash tag in the prefix would put every key of every session in one cluster slot.
  if (/[{}]/.test(keyPrefix)) c.problem('store.keyPrefix', 'must not contain { or } (a hash tag would put every key in one cluster slot)');
  const waitForReplicas = c.int('store.waitForReplicas', s.waitForReplicas, topology.mode === 'sentinel' ? 1 : 0, 0, 16);
  if (topology.mode === 'cluster' && waitForReplicas > 0) c.problem('store.waitForReplicas', 'is not supported with store.cluster (WAIT has no key to route by)');
  return {
    kind,
    topology,
    keyPrefix,
    commandTimeoutMs: c.int('store.commandTimeoutMs', s.commandTimeoutMs, 500),
    connectTimeoutMs: c.int('store.connectTimeoutMs', s.connectTimeoutMs, 1000),
    livenessCacheMs: c.int('store.livenessCacheMs', s.livenessCacheMs, 2000, 0, 60_000),
    waitForReplicas,
  };
}

/** Exactly one of url (REDIS_URL sets it), cluster and sentinel. */
function readTopology(c: Checker, s: Record<string, unknown>): RedisTopology {
  const given = (['url', 'cluster', 'sentinel'] as const).filter((k) => s[k] !== undefined && s[k] !== null);
  if (given.length > 1) {
    c.problem('store', `sets ${given.join(' and ')}: set exactly one of url (or REDIS_URL), cluster, sentinel`);
  }
  if (given[0] === 'cluster') {
    const cl = c.obj('store.cluster', s.cluster, true);
    c.unknownKeys('store.cluster', cl, ['nodes']);
    const nodes = c.list('store.cluster.nodes', cl.nodes).map((n, i) => c.url(`store.cluster.nodes[${i}]`, n, ['redis:', 'rediss:']));
    if (nodes.length === 0) c.problem('store.cluster.nodes', 'must list at least one node URL');
    return { mode: 'cluster', nodes };
  }
  if (given[0] === 'sentinel') {
    const se = c.obj('store.sentinel', s.sentinel, true);
    c.unknownKeys('store.sentinel', se, ['name', 'sentinels', 'password', 'sentinelPassword', 'tls']);
    const sentinels = c.list('store.sentinel.sentinels', se.sentinels).map((n, i) => {
      const addr = c.str(`store.sentinel.sentinels[${i}]`, n);
      if (addr && !/^[^\s:/]+:\d{1,5}$/.test(addr)) c.problem(`store.sentinel.sentinels[${i}]`, 'must be host:port');
      return addr;
    });
    if (sentinels.length === 0) c.problem('store.sentinel.sentinels', 'must list at least one host:port');
    return {
      mode: 'sentinel',
      name: c.str('store.sentinel.name', se.name),
      sentinels,
      password: se.password === undefined ? undefined : c.str('store.sentinel.password', se.password),
      sentinelPassword: se.sentinelPassword === undefined ? undefined : c.str('store.sentinel.sentinelPassword', se.sentinelPassword),
      tls: c.bool('store.sentinel.tls', se.tls, false),
    };
  }
  return { mode: 'single', url: c.url('store.url', s.url, ['redis:', 'rediss:']) };
}

function readUsers(c: Checker, u: Record<string, unknown>, at: (p: string) => string): UsersConfig {
  c.unknownKeys('users', u, ['htpasswd', 'cacheTtlSeconds', 'watch', 'maxPendingVerifications']);
  const file = c.str('users.htpasswd', u.htpasswd);
  return {
    htpasswd: file ? at(file) : '',
    cacheTtlSeconds: c.int('users.cacheTtlSeconds', u.cacheTtlSeconds, 300, 0),
    watch: c.bool('users.watch', u.watch, true),
    maxPendingVerifications: c.int('users.maxPendingVerifications', u.maxPendingVerifications, 64),
  };
}

function readTokens(c: Checker, t: Record<string, unknown>, at: (p: string) => string): TokensConfig {
  c.unknownKeys('tokens', t, ['issuer', 'audience', 'accessTtlSeconds', 'refreshTtlSeconds', 'refreshReuseGraceSeconds', 'signing', 'verificationKeys', 'cors']);
  const tokens: TokensConfig = {
    issuer: c.str('tokens.issuer', t.issuer, 'auth-gateway'),
    audience: c.str('tokens.audience', t.audience, 'auth-gateway'),
    accessTtlSeconds: c.int('tokens.accessTtlSeconds', t.accessTtlSeconds, 5400),
    refreshTtlSeconds: c.int('tokens.refreshTtlSeconds', t.refreshTtlSeconds, SIXTY_DAYS),
    refreshReuseGraceSeconds: c.int('tokens.refreshReuseGraceSeconds', t.refreshReuseGraceSeconds, 0, 0),
    signing: readSigningKey(c, 'tokens.signing', c.obj('tokens.signing', t.signing, true), at),
    verificationKeys: c.list('tokens.verificationKeys', t.verificationKeys).map((k, i) =>
      readVerificationKey(c, `tokens.verificationKeys[${i}]`, c.obj(`tokens.verificationKeys[${i}]`, k, true), at)),
  };
  if (t.cors !== undefined && t.cors !== null && t.cors !== false) tokens.cors = readCors(c, 'tokens.cors', t.cors, ['POST']);
  if (tokens.refreshTtlSeconds < tokens.accessTtlSeconds) {
    c.problem('tokens.refreshTtlSeconds', 'must be at least tokens.accessTtlSeconds (a session outlives its access tokens)');
  }
  return tokens;
}

function readSigningKey(c: Checker, key: string, k: Record<string, unknown>, at: (p: string) => string): SigningKeyConfig {
  const p = readKeyParts(c, key, k, 'privateKeyFile', at);
  return p.alg === 'HS256' ? { alg: p.alg, secret: p.value, kid: p.kid } : { alg: p.alg, privateKeyFile: p.value, kid: p.kid };
}

function readVerificationKey(c: Checker, key: string, k: Record<string, unknown>, at: (p: string) => string): VerificationKeyConfig {
  const p = readKeyParts(c, key, k, 'publicKeyFile', at);
  return p.alg === 'HS256' ? { alg: p.alg, secret: p.value, kid: p.kid } : { alg: p.alg, publicKeyFile: p.value, kid: p.kid };
}

/** alg, kid, and the secret (HS256) or the key file (RS256/ES256, named by `fileField`). */
function readKeyParts(c: Checker, key: string, k: Record<string, unknown>, fileField: string, at: (p: string) => string) {
  const alg = c.oneOf(`${key}.alg`, k.alg, ALGS, 'HS256');
  const kid = k.kid === undefined ? undefined : c.str(`${key}.kid`, k.kid);
  if (alg === 'HS256') {
    c.unknownKeys(key, k, ['alg', 'secret', 'kid']);
    return { alg, kid, value: readSecret(c, `${key}.secret`, k.secret) };
  }
  c.unknownKeys(key, k, ['alg', fileField, 'kid']);
  return { alg, kid, value: at(c.str(`${key}.${fileField}`, k[fileField])) };
}

function readSecret(c: Checker, key: string, value: unknown): string {
  if (value === undefined || value === null || value === '') {
    c.problem(key, 'is required: set a random secret of at least 32 bytes (e.g. GATEWAY_JWT_SECRET=$(openssl rand -base64 48)); there is no built-in default');
    return '';
  }
  const secret = c.str(key, value);
  if (secret && Buffer.byteLength(secret) < MIN_SECRET_BYTES) c.problem(key, `must be at least ${MIN_SECRET_BYTES} bytes long`);
  return secret;
}

function readLockout(c: Checker, l: Record<string, unknown>): LockoutConfig {
  c.unknownKeys('lockout', l, ['maxFailuresPerUser', 'maxFailuresPerAccount', 'windowSeconds', 'addressBurst', 'addressFailuresPerMinute', 'maxFailuresPerAddress']);
  if (l.maxFailuresPerAddress !== undefined) {
    c.problem('lockout.maxFailuresPerAddress', 'is gone: an address is now slowed down, never locked out (use lockout.addressBurst and lockout.addressFailuresPerMinute)');
  }
  return {
    maxFailuresPerUser: c.int('lockout.maxFailuresPerUser', l.maxFailuresPerUser, 10),
    maxFailuresPerAccount: c.int('lockout.maxFailuresPerAccount', l.maxFailuresPerAccount, 100),
    windowSeconds: c.int('lockout.windowSeconds', l.windowSeconds, 900),
    addressBurst: c.int('lockout.addressBurst', l.addressBurst, 10),
    addressFailuresPerMinute: c.int('lockout.addressFailuresPerMinute', l.addressFailuresPerMinute, 30, 1, 6000),
  };
}

function readUpstreams(c: Checker, raw: unknown): Record<string, UpstreamConfig> {
  const map = c.obj('upstreams', raw);
  const out: Record<string, UpstreamConfig> = {};
  for (const [name, value] of Object.entries(map)) {
    const key = `upstreams.${name}`;
    const u = c.obj(key, value, true);
    c.unknownKeys(key, u, ['url', 'targets', 'balance', 'cooldownMs', 'healthCheck', 'timeouts', 'timeoutMs', 'preserveHost', 'maxConnections', 'maxQueued']);
    const targets = readTargets(c, key, u);
    const timeouts = readTimeouts(c, `${key}.timeouts`, c.obj(`${key}.timeouts`, u.timeouts), DEFAULT_TIMEOUTS);
    // The one-number form of earlier releases: the response-headers timeout.
    if (u.timeoutMs !== undefined) timeouts.responseMs = c.int(`${key}.timeoutMs`, u.timeoutMs, DEFAULT_TIMEOUTS.responseMs);
    const upstream: UpstreamConfig = {
      url: targets[0] ?? '',
      targets,
      balance: c.oneOf(`${key}.balance`, u.balance, ['round-robin', 'least-requests'], 'round-robin'),
      cooldownMs: c.int(`${key}.cooldownMs`, u.cooldownMs, 10_000),
      timeouts,
      preserveHost: c.bool(`${key}.preserveHost`, u.preserveHost, false),
      maxConnections: c.int(`${key}.maxConnections`, u.maxConnections, 256, 1),
      maxQueued: c.int(`${key}.maxQueued`, u.maxQueued, 1024, 0),
    };
    if (u.healthCheck !== undefined && u.healthCheck !== false) {
      const h = c.obj(`${key}.healthCheck`, u.healthCheck);
      c.unknownKeys(`${key}.healthCheck`, h, ['path', 'intervalMs', 'timeoutMs']);
      const path = c.str(`${key}.healthCheck.path`, h.path);
      if (path && !path.startsWith('/')) c.problem(`${key}.healthCheck.path`, 'must start with /');
      upstream.healthCheck = { path, intervalMs: c.int(`${key}.healthCheck.intervalMs`, h.intervalMs, 5000, 100), timeoutMs: c.int(`${key}.healthCheck.timeoutMs`, h.timeoutMs, 2000, 10) };
    }
    out[name] = upstream;
  }
  return out;
}

/** `url` (one target) or `targets` (several), exactly one of them. */
function readTargets(c: Checker, key: string, u: Record<string, unknown>): string[] {
  if (u.url !== undefined && u.targets !== undefined) {
    c.problem(key, 'has both url and targets: give one target as url or several as targets');
    return [];
  }
  if (u.targets === undefined) return [c.url(`${key}.url`, u.url, ['http:', 'https:'])];
  const list = c.list(`${key}.targets`, u.targets);
  if (list.length === 0 && Array.isArray(u.targets)) c.problem(`${key}.targets`, 'must name at least one URL');
  return list.map((t, i) => c.url(`${key}.targets[${i}]`, t, ['http:', 'https:']));
}

const DEFAULT_TIMEOUTS: Timeouts = { connectMs: 5000, responseMs: 30_000, idleMs: 60_000 };

function readTimeouts(c: Checker, key: string, t: Record<string, unknown>, defaults: Timeouts): Timeouts {
  c.unknownKeys(key, t, ['connectMs', 'responseMs', 'idleMs']);
  return {
    connectMs: c.int(`${key}.connectMs`, t.connectMs, defaults.connectMs),
    responseMs: c.int(`${key}.responseMs`, t.responseMs, defaults.responseMs),
    idleMs: c.int(`${key}.idleMs`, t.idleMs, defaults.idleMs),
  };
}


function readRoutes(c: Checker, raw: unknown, upstreams: Record<string, UpstreamConfig>): RouteConfig[] {
  const seen = new Set<string>();
  return c.list('routes', raw).map((value, i) => {
    const key = `routes[${i}]`;
    const r = c.obj(key, value, true);
    c.unknownKeys(key, r, ['path', 'upstream', 'forwardAuthorization', 'paging', 'rateLimit', 'stripPrefix', 'timeouts', 'allowHeaders', 'websocket', 'cors']);
    const path = c.str(`${key}.path`, r.path);
    if (path && !/^\/(?:[A-Za-z0-9._~-]+\/)*[A-Za-z0-9._~-]+$/.test(path)) {
      c.problem(`${key}.path`, 'must be an absolute path of plain segments without a trailing slash, e.g. /v1/conversations');
    } else if (path.startsWith('/v1/tokens')) {
      c.problem(`${key}.path`, 'must not be under /v1/tokens (served by the gateway itself)');
    }
    if (seen.has(path)) c.problem(`${key}.path`, `repeats ${path}`);
    seen.add(path);
    const upstream = c.str(`${key}.upstream`, r.upstream);
    if (upstream && !upstreams[upstream]) c.problem(`${key}.upstream`, `names no upstream (known: ${Object.keys(upstreams).join(', ') || 'none'})`);
    const route: RouteConfig = {
      path,
      upstream,
      forwardAuthorization: c.bool(`${key}.forwardAuthorization`, r.forwardAuthorization, false),
      stripPrefix: c.bool(`${key}.stripPrefix`, r.stripPrefix, false),
      timeouts: readTimeouts(c, `${key}.timeouts`, c.obj(`${key}.timeouts`, r.timeouts), upstreams[upstream]?.timeouts ?? DEFAULT_TIMEOUTS),
      allowHeaders: c.list(`${key}.allowHeaders`, r.allowHeaders).map((h, j) => {
        const name = c.str(`${key}.allowHeaders[${j}]`, h).toLowerCase();
        if (name && !OVERRIDE_HEADERS.includes(name)) c.problem(`${key}.allowHeaders[${j}]`, `must be one of the override headers the gateway removes (${OVERRIDE_HEADERS.join(', ')})`);
        return name;
      }),
    };
    if (r.paging !== undefined && r.paging !== false) route.paging = readPaging(c, `${key}.paging`, c.obj(`${key}.paging`, r.paging === true ? {} : r.paging));
    if (r.rateLimit === false || r.rateLimit === null) route.rateLimit = null;
    else if (r.rateLimit !== undefined) route.rateLimit = readRateLimit(c, `${key}.rateLimit`, c.obj(`${key}.rateLimit`, r.rateLimit));
    if (r.websocket !== undefined) route.websocket = c.bool(`${key}.websocket`, r.websocket, true);
    if (r.cors !== undefined && r.cors !== null && r.cors !== false) route.cors = readCors(c, `${key}.cors`, r.cors, DEFAULT_CORS_METHODS);
    return route;
  });
}

function readPaging(c: Checker, key: string, p: Record<string, unknown>): PagingRules {
  c.unknownKeys(key, p, ['sizes', 'defaultSize', 'sortable']);
  const sizes = p.sizes === undefined ? DEFAULT_PAGE_SIZES : c.list(`${key}.sizes`, p.sizes).map((s, i) => c.int(`${key}.sizes[${i}]`, s, 0));
  const defaultSize = c.int(`${key}.defaultSize`, p.defaultSize, 20);
  if (!sizes.includes(defaultSize)) c.problem(`${key}.defaultSize`, `must be one of ${key}.sizes (${sizes.join(', ')})`);
  const sortable = c.list(`${key}.sortable`, p.sortable).map((s, i) => {
    const prop = c.str(`${key}.sortable[${i}]`, s);
    if (prop && !/^[A-Za-z_][A-Za-z0-9_.]*$/.test(prop)) c.problem(`${key}.sortable[${i}]`, 'must be a property name (letters, digits, _ and .)');
    return prop;
  });
  return { sizes, defaultSize, sortable };
}

function readRateLimit(c: Checker, key: string, r: Record<string, unknown>): RateLimitRule {
  c.unknownKeys(key, r, ['requests', 'windowSeconds']);
  if (r.requests === undefined) c.problem(`${key}.requests`, 'is required');
  return { requests: c.int(`${key}.requests`, r.requests, 1), windowSeconds: c.int(`${key}.windowSeconds`, r.windowSeconds, 60) };
}

const DEFAULT_CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const DEFAULT_CORS_HEADERS = ['authorization', 'content-type', 'x-request-id'];
const DEFAULT_CORS_EXPOSED = ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'WWW-Authenticate'];
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A CORS block: origins are exact (scheme://host[:port], as browsers send them) or '*' without credentials. */
function readCors(c: Checker, key: string, raw: unknown, defaultMethods: string[]): CorsPolicy {
  const p = c.obj(key, raw);
  c.unknownKeys(key, p, ['origins', 'methods', 'headers', 'exposedHeaders', 'credentials', 'maxAge']);
  const credentials = c.bool(`${key}.credentials`, p.credentials, false);
  let origins: string[] | '*';
  if (p.origins === '*' || (Array.isArray(p.origins) && p.origins.length === 1 && p.origins[0] === '*')) {
    origins = '*';
    if (credentials) c.problem(`${key}.origins`, 'must list exact origins when credentials is true (browsers refuse * with credentials)');
  } else {
    origins = c.list(`${key}.origins`, p.origins).map((o, i) => {
      const origin = c.str(`${key}.origins[${i}]`, o);
      if (origin && !isOrigin(origin)) c.problem(`${key}.origins[${i}]`, 'must be an origin: scheme://host[:port], without path or trailing slash (e.g. https://app.example.com)');
      return origin;
    });
    if (origins.length === 0) c.problem(`${key}.origins`, 'is required: a list of origins, or *');
  }
  const names = (field: string, fallback: string[], normalize: (s: string) => string) =>
    p[field] === undefined ? fallback : c.list(`${key}.${field}`, p[field]).map((v, i) => {
      const name = c.str(`${key}.${field}[${i}]`, v);
      if (name && !TOKEN.test(name)) c.problem(`${key}.${field}[${i}]`, 'must be a header or method name');
      return normalize(name);
    });
  return {
    origins,
    methods: names('methods', defaultMethods, (m) => m.toUpperCase()),
    headers: names('headers', DEFAULT_CORS_HEADERS, (h) => h.toLowerCase()),
    exposedHeaders: names('exposedHeaders', DEFAULT_CORS_EXPOSED, (h) => h),
    credentials,
    maxAgeSeconds: c.int(`${key}.maxAge`, p.maxAge, 600, 0, 86_400),
  };
}

function isOrigin(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === value;
  } catch {
    return false;
  }
}

function readLog(c: Checker, l: Record<string, unknown>): Config['log'] {
  c.unknownKeys('log', l, ['level', 'access']);
  return {
    level: c.oneOf('log.level', l.level, ['debug', 'info', 'warn', 'error', 'silent'], 'info'),
    access: c.bool('log.access', l.access, true),
  };
}

/** `server.tls`: absent, null or false for plain HTTP. */
function readTls(c: Checker, raw: unknown, at: (p: string) => string): TlsConfig | undefined {
  if (raw === undefined || raw === null || raw === false) return undefined;
  const t = c.obj('server.tls', raw);
  c.unknownKeys('server.tls', t, ['certFile', 'keyFile', 'reloadIntervalMs']);
  const certFile = c.str('server.tls.certFile', t.certFile);
  const keyFile = c.str('server.tls.keyFile', t.keyFile);
  return {
    certFile: certFile ? at(certFile) : '',
    keyFile: keyFile ? at(keyFile) : '',
    reloadIntervalMs: c.int('server.tls.reloadIntervalMs', t.reloadIntervalMs, 5000, 100),
  };
}

/** `admin`: default 127.0.0.1:9091, `false` for none. */
function readAdmin(c: Checker, raw: unknown): AdminConfig | false {
  if (raw === false || raw === 'false') return false;
  const a = c.obj('admin', raw);
  c.unknownKeys('admin', a, ['host', 'port']);
  return { host: c.str('admin.host', a.host, '127.0.0.1'), port: c.int('admin.port', a.port, 9091, 0, 65535) };
}
