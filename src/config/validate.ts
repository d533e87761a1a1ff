import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { Checker } from './checker.js';
import { ConfigError } from './errors.js';
import type {
  Config, LockoutConfig, PagingRules, RateLimitRule, RedisTopology, RouteConfig, ServerConfig, SigningKeyConfig, StoreConfig,
  TokensConfig, UpstreamConfig, UsersConfig, VerificationKeyConfig,
} from './types.js';

export const DEFAULT_PAGE_SIZES = [10, 20, 50, 100, 200];
const SIXTY_DAYS = 60 * 24 * 3600;
const ALGS = ['HS256', 'RS256', 'ES256'] as const;
const MIN_SECRET_BYTES = 32;

/** Turns parsed YAML into a Config, or throws a ConfigError listing every problem. */
export function validateConfig(raw: unknown, file: string, baseDir: string): Config {
  const c = new Checker();
  const root = c.obj('(root)', raw, true);
  c.unknownKeys('', root, ['server', 'store', 'users', 'tokens', 'lockout', 'rateLimit', 'upstreams', 'routes', 'log']);
  const at = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));

  // Read in the order of the file, so problems are listed in that order too.
  const server = readServer(c, c.obj('server', root.server));
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
  const config: Config = { file, server, store, users, tokens, lockout, rateLimit, upstreams, routes, log };
  if (c.problems.length > 0) throw new ConfigError(c.problems);
  return config;
}

function readServer(c: Checker, s: Record<string, unknown>): ServerConfig {
  c.unknownKeys('server', s, ['host', 'port', 'trustProxy', 'shutdownGraceMs', 'workers']);
  const trust = s.trustProxy;
  return {
    host: c.str('server.host', s.host, '0.0.0.0'),
    port: c.int('server.port', s.port, 8080, 0, 65535),
    trustProxy: trust === true || trust === 'true' ? 1 : trust === false || trust === 'false' ? 0 : c.int('server.trustProxy', trust, 0, 0, 32),
    shutdownGraceMs: c.int('server.shutdownGraceMs', s.shutdownGraceMs, 10_000, 0),
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
  c.unknownKeys('tokens', t, ['issuer', 'audience', 'accessTtlSeconds', 'refreshTtlSeconds', 'refreshReuseGraceSeconds', 'signing', 'verificationKeys']);
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
  c.unknownKeys('lockout', l, ['maxFailuresPerUser', 'maxFailuresPerAddress', 'windowSeconds']);
  return {
    maxFailuresPerUser: c.int('lockout.maxFailuresPerUser', l.maxFailuresPerUser, 10),
    maxFailuresPerAddress: c.int('lockout.maxFailuresPerAddress', l.maxFailuresPerAddress, 10),
    windowSeconds: c.int('lockout.windowSeconds', l.windowSeconds, 900),
  };
}

function readUpstreams(c: Checker, raw: unknown): Record<string, UpstreamConfig> {
  const map = c.obj('upstreams', raw);
  const out: Record<string, UpstreamConfig> = {};
  for (const [name, value] of Object.entries(map)) {
    const key = `upstreams.${name}`;
    const u = c.obj(key, value, true);
    c.unknownKeys(key, u, ['url', 'timeoutMs']);
    out[name] = { url: c.url(`${key}.url`, u.url, ['http:', 'https:']), timeoutMs: c.int(`${key}.timeoutMs`, u.timeoutMs, 10_000) };
  }
  return out;
}

function readRoutes(c: Checker, raw: unknown, upstreams: Record<string, UpstreamConfig>): RouteConfig[] {
  const seen = new Set<string>();
  return c.list('routes', raw).map((value, i) => {
    const key = `routes[${i}]`;
    const r = c.obj(key, value, true);
    c.unknownKeys(key, r, ['path', 'upstream', 'forwardAuthorization', 'paging', 'rateLimit']);
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
    const route: RouteConfig = { path, upstream, forwardAuthorization: c.bool(`${key}.forwardAuthorization`, r.forwardAuthorization, false) };
    if (r.paging !== undefined && r.paging !== false) route.paging = readPaging(c, `${key}.paging`, c.obj(`${key}.paging`, r.paging === true ? {} : r.paging));
    if (r.rateLimit === false || r.rateLimit === null) route.rateLimit = null;
    else if (r.rateLimit !== undefined) route.rateLimit = readRateLimit(c, `${key}.rateLimit`, c.obj(`${key}.rateLimit`, r.rateLimit));
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

function readLog(c: Checker, l: Record<string, unknown>): Config['log'] {
  c.unknownKeys('log', l, ['level', 'access']);
  return {
    level: c.oneOf('log.level', l.level, ['debug', 'info', 'warn', 'error', 'silent'], 'info'),
    access: c.bool('log.access', l.access, true),
  };
}
