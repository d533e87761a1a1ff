import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { OVERRIDE_HEADERS } from '../core/headers.js';
import { checkRouteOverlaps, checkUnguardedParents, readAllow, readForwardAuth, readGroupsFile, readIdentity } from './authz-settings.js';
import { readApiKeys } from './api-key-settings.js';
import { Checker } from './checker.js';
import { groupsClaimOf } from './issuer-settings.js';
import { readLdap } from './ldap-settings.js';
import { readScalars } from './sections.js';
import { readLogin } from './login-settings.js';
import { childrenOf, numberDefault, setting, SETTINGS, type Setting, type SettingKey } from './defaults.js';
import { ConfigError } from './config-error.js';
import type {
  AdminConfig,
  TracingConfig, Config, CorsPolicy, LockoutConfig, PagingRules, RateLimitRule, RedisTopology, RouteConfig, ServerConfig,
  SigningKeyConfig, StoreConfig, Timeouts, TlsConfig, TokensConfig, UpstreamConfig, UsersConfig, VerificationKeyConfig,
} from './types.js';
import type { KeyLocator } from './yaml-lines.js';

export const DEFAULT_PAGE_SIZES: number[] = [...SETTINGS['routes[].paging.sizes'].default];
const ALGS = SETTINGS['tokens.signing.alg'].values;
const MIN_SECRET_BYTES = 32;

/** Turns parsed YAML into a Config, or throws a ConfigError listing every problem. */
export function validateConfig(raw: unknown, file: string, baseDir: string): Config {
  const { config, problems } = checkConfig(raw, file, baseDir);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** The Config as far as it could be read (defaults where a key is bad), and every problem found. */
export function checkConfig(raw: unknown, file: string, baseDir: string, locate?: KeyLocator): { config: Config; problems: string[]; warnings: string[] } {
  const c = new Checker(locate, raw);
  const root = c.obj('(root)', raw, true);
  c.unknownKeys('', root, childrenOf(''));
  const at = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));

  // Read in the order of the file, so problems are listed in that order too.
  const server = readServer(c, c.obj('server', root.server));
  if (root.server && typeof root.server === 'object') server.tls = readTls(c, (root.server as Record<string, unknown>).tls, at);
  if (server.h2c && server.tls) c.problem('server.h2c', 'is for the plain listener: with server.tls, HTTP/2 is server.tls.http2');
  const store = readStore(c, c.obj('store', root.store));
  if (server.workers > 1 && store.kind === 'memory') {
    c.problem('server.workers', 'needs store.kind redis: with the memory store each worker would have its own sessions');
  }
  const users = readUsers(c, c.obj('users', root.users, true), at);
  const tokens = readTokens(c, c.obj('tokens', root.tokens, true), at);
  const lockout = readLockout(c, c.obj('lockout', root.lockout));
  const rateLimit = root.rateLimit === undefined || root.rateLimit === null || root.rateLimit === false
    ? undefined : readRateLimit(c, 'rateLimit', c.obj('rateLimit', root.rateLimit));
  const upstreams = readUpstreams(c, root.upstreams, at);
  // Allow rules may name groups when some source has them: the htgroup file, the store's users and API keys,
  // the directory, a provider's groups claim, client certificates (their OU values).
  const storeGroups = users.store || (root.apiKeys !== undefined && root.apiKeys !== null && root.apiKeys !== false) ? 'the store' : undefined;
  const routes = readRoutes(c, root.routes, upstreams, users.groups ?? storeGroups ?? users.ldap?.groupsBase ?? groupsClaimOf(root.identity) ?? server.tls?.clientCa);
  const log = readLog(c, c.obj('log', root.log));
  const tracing = readTracing(c, root.tracing);
  const admin = readAdmin(c, root.admin);
  const forwardAuth = readForwardAuth(c, root.forwardAuth);
  const identity = readIdentity(c, root.identity, at);
  identity.issuers.forEach((i, n) => {
    if (i.issuer && i.issuer === tokens.issuer) c.problem(`identity.issuers[${n}].issuer`, 'must not be tokens.issuer (the gateway\'s own tokens carry it)');
  });
  const apiKeys = readApiKeys(c, root.apiKeys);
  checkRouteOverlaps(c, routes, forwardAuth, identity);
  checkUnguardedParents(c, routes);
  const login = readLogin(c, root.login, identity, routes, forwardAuth, at);
  const config: Config = { file, server, store, users, tokens, lockout, rateLimit, upstreams, routes, log, tracing, admin, forwardAuth, identity, apiKeys, login };
  return { config, problems: c.problems, warnings: c.warnings };
}

function readServer(c: Checker, s: Record<string, unknown>): ServerConfig {
  c.unknownKeys('server', s, childrenOf('server'));
  const trust = s.trustProxy;
  return {
    ...readScalars(c, 'server', s),
    trustProxy: trust === true || trust === 'true' ? 1 : trust === false || trust === 'false' ? 0 : int(c, 'server.trustProxy', trust),
    workers: s.workers === 'auto' ? availableParallelism() : int(c, 'server.workers', s.workers),
    http2: readHttp2(c, c.obj('server.http2', s.http2)),
  };
}

function readHttp2(c: Checker, h: Record<string, unknown>): ServerConfig['http2'] {
  c.unknownKeys('server.http2', h, childrenOf('server.http2'));
  return readScalars(c, 'server.http2', h);
}

function readStore(c: Checker, s: Record<string, unknown>): StoreConfig {
  const kind = oneOf(c, 'store.kind', s.kind) as StoreConfig['kind'];
  if (kind === 'memory') {
    c.unknownKeys('store', s, ['kind']);
    return { kind };
  }
  c.unknownKeys('store', s, childrenOf('store'));
  const topology = readTopology(c, s);
  const scalars = readScalars(c, 'store', s, { except: ['kind', 'waitForReplicas'] });
  // A hash tag in the prefix would put every key of every session in one cluster slot.
  if (/[{}]/.test(scalars.keyPrefix)) c.problem('store.keyPrefix', 'must not contain { or } (a hash tag would put every key in one cluster slot)');
  const waitForReplicas = int(c, 'store.waitForReplicas', s.waitForReplicas, topology.mode === 'sentinel' ? 1 : 0);
  if (topology.mode === 'cluster' && waitForReplicas > 0) c.problem('store.waitForReplicas', 'is not supported with store.cluster (WAIT has no key to route by)');
  return { kind, topology, ...scalars, waitForReplicas };
}

/** Exactly one of url (REDIS_URL sets it), cluster and sentinel. */
function readTopology(c: Checker, s: Record<string, unknown>): RedisTopology {
  const given = (['url', 'cluster', 'sentinel'] as const).filter((k) => s[k] !== undefined && s[k] !== null);
  if (given.length > 1) {
    c.problem('store', `sets ${given.join(' and ')}: set exactly one of url (or REDIS_URL), cluster, sentinel`);
  }
  if (given[0] === 'cluster') {
    const cl = c.obj('store.cluster', s.cluster, true);
    c.unknownKeys('store.cluster', cl, childrenOf('store.cluster'));
    const nodes = c.list('store.cluster.nodes', cl.nodes).map((n, i) => c.url(`store.cluster.nodes[${i}]`, n, ['redis:', 'rediss:']));
    if (nodes.length === 0) c.problem('store.cluster.nodes', 'must list at least one node URL');
    return { mode: 'cluster', nodes };
  }
  if (given[0] === 'sentinel') {
    const se = c.obj('store.sentinel', s.sentinel, true);
    c.unknownKeys('store.sentinel', se, childrenOf('store.sentinel'));
    const sentinels = c.list('store.sentinel.sentinels', se.sentinels).map((n, i) => {
      const addr = c.str(`store.sentinel.sentinels[${i}]`, n);
      if (addr && !/^[^\s:/]+:\d{1,5}$/.test(addr)) c.problem(`store.sentinel.sentinels[${i}]`, 'must be host:port');
      return addr;
    });
    if (sentinels.length === 0) c.problem('store.sentinel.sentinels', 'must list at least one host:port');
    return { mode: 'sentinel', sentinels, ...readScalars(c, 'store.sentinel', se) };
  }
  return { mode: 'single', url: c.url('store.url', s.url, ['redis:', 'rediss:']) };
}

function readUsers(c: Checker, u: Record<string, unknown>, at: (p: string) => string): UsersConfig {
  c.unknownKeys('users', u, childrenOf('users'));
  const ldap = readLdap(c, u.ldap, at);
  const plain = readScalars(c, 'users', u, { except: ['htpasswd', 'groups'] });
  // Another source of users (the store, a directory) makes the file optional (a name in the file and the
  // directory is verified by the file first; one in the file and the store is refused).
  const file = c.str('users.htpasswd', u.htpasswd, plain.store || ldap ? '' : undefined);
  const users: UsersConfig = { htpasswd: file ? at(file) : '', ...plain };
  const groups = readGroupsFile(c, u.groups, at);
  if (groups) users.groups = groups;
  if (ldap) users.ldap = ldap;
  return users;
}

function readTokens(c: Checker, t: Record<string, unknown>, at: (p: string) => string): TokensConfig {
  c.unknownKeys('tokens', t, childrenOf('tokens'));
  const tokens: TokensConfig = {
    ...readScalars(c, 'tokens', t, { except: ['refreshSecret'] }),
    signing: readSigningKey(c, 'tokens.signing', c.obj('tokens.signing', t.signing, true), at),
    verificationKeys: c.list('tokens.verificationKeys', t.verificationKeys).map((k, i) =>
      readVerificationKey(c, `tokens.verificationKeys[${i}]`, c.obj(`tokens.verificationKeys[${i}]`, k, true), at)),
  };
  if (t.refreshSecret !== undefined && t.refreshSecret !== null) {
    tokens.refreshSecret = c.str('tokens.refreshSecret', t.refreshSecret, '');
    if (Buffer.byteLength(tokens.refreshSecret) < 32) c.problem('tokens.refreshSecret', 'must be at least 32 bytes');
  }
  if (t.cors !== undefined && t.cors !== null && t.cors !== false) tokens.cors = readCors(c, 'tokens.cors', t.cors, ['POST']);
  if (tokens.refreshTtlSeconds < tokens.accessTtlSeconds) {
    c.problem('tokens.refreshTtlSeconds', 'must be at least tokens.accessTtlSeconds (a session outlives its access tokens)');
  }
  return tokens;
}

function readSigningKey(c: Checker, key: string, k: Record<string, unknown>, at: (p: string) => string): SigningKeyConfig {
  const p = readKeyParts(c, key, k, 'tokens.signing', at);
  return p.alg === 'HS256' ? { alg: p.alg, secret: p.value, kid: p.kid } : { alg: p.alg, privateKeyFile: p.value, kid: p.kid };
}

function readVerificationKey(c: Checker, key: string, k: Record<string, unknown>, at: (p: string) => string): VerificationKeyConfig {
  const p = readKeyParts(c, key, k, 'tokens.verificationKeys[]', at);
  return p.alg === 'HS256' ? { alg: p.alg, secret: p.value, kid: p.kid } : { alg: p.alg, publicKeyFile: p.value, kid: p.kid };
}

/** alg, kid, and the secret (HS256) or the key file (RS256/ES256, named by `fileField`). */
function readKeyParts(c: Checker, key: string, k: Record<string, unknown>, path: 'tokens.signing' | 'tokens.verificationKeys[]', at: (p: string) => string) {
  const alg = c.oneOf(`${key}.alg`, k.alg, ALGS, setting(`${path}.alg`).default as (typeof ALGS)[number]);
  const kid = k.kid === undefined ? undefined : c.str(`${key}.kid`, k.kid);
  const fileField = path === 'tokens.signing' ? 'privateKeyFile' : 'publicKeyFile';
  if (alg === 'HS256') {
    c.unknownKeys(key, k, childrenOf(path).filter((f) => f !== fileField));
    return { alg, kid, value: readSecret(c, `${key}.secret`, k.secret) };
  }
  c.unknownKeys(key, k, childrenOf(path).filter((f) => f !== 'secret'));
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
  c.unknownKeys('lockout', l, childrenOf('lockout'));
  const lockout: LockoutConfig = readScalars(c, 'lockout', l);
  // The setting of an earlier release keeps working for at least one release after it was retired: an
  // operator's file must not stop the gateway from starting after an upgrade. It becomes the burst.
  if (l.maxFailuresPerAddress !== undefined) {
    const burst = int(c, 'lockout.maxFailuresPerAddress', l.maxFailuresPerAddress, 1);
    const kept = l.addressBurst !== undefined;
    if (!kept) lockout.addressBurst = burst;
    c.warning(c.at('lockout.maxFailuresPerAddress'), 'is retired (an address is now slowed down, never locked out) and will be refused by a later release: '
      + (kept ? 'ignored, since lockout.addressBurst is set; remove it' : `read as lockout.addressBurst: ${burst}; write addressBurst: ${burst} instead (and addressFailuresPerMinute for the pace after it)`));
  }
  return lockout;
}

function readUpstreams(c: Checker, raw: unknown, at: (p: string) => string): Record<string, UpstreamConfig> {
  const map = c.obj('upstreams', raw);
  const out: Record<string, UpstreamConfig> = {};
  for (const [name, value] of Object.entries(map)) {
    const key = `upstreams.${name}`;
    const u = c.obj(key, value, true);
    c.unknownKeys(key, u, childrenOf('upstreams.<name>'));
    const targets = readTargets(c, key, u);
    const timeouts = readTimeouts(c, `${key}.timeouts`, c.obj(`${key}.timeouts`, u.timeouts), DEFAULT_TIMEOUTS);
    // The one-number form of earlier releases: the response-headers timeout.
    if (u.timeoutMs !== undefined) timeouts.responseMs = int(c, 'upstreams.<name>.timeoutMs', u.timeoutMs, DEFAULT_TIMEOUTS.responseMs, `${key}.timeoutMs`);
    const upstream: UpstreamConfig = {
      url: targets[0] ?? '',
      targets,
      ...readScalars(c, 'upstreams.<name>', u, { as: key, except: ['timeoutMs'], at }),
      timeouts,
    };
    checkProtocol(c, key, upstream);
    if (u.healthCheck !== undefined && u.healthCheck !== false) {
      const h = c.obj(`${key}.healthCheck`, u.healthCheck);
      c.unknownKeys(`${key}.healthCheck`, h, childrenOf('upstreams.<name>.healthCheck'));
      upstream.healthCheck = readScalars(c, 'upstreams.<name>.healthCheck', h, { as: `${key}.healthCheck` });
      const path = upstream.healthCheck.path;
      if (path && !path.startsWith('/')) c.problem(`${key}.healthCheck.path`, 'must start with /');
    }
    out[name] = upstream;
  }
  return out;
}

/** h2c is cleartext (`http:` targets), h2 is TLS (`https:` targets): a scheme that says otherwise is a mistake. */
function checkProtocol(c: Checker, key: string, u: UpstreamConfig): void {
  const scheme = u.protocol === 'h2c' ? 'http:' : u.protocol === 'h2' ? 'https:' : undefined;
  if (scheme === undefined) return;
  for (const target of u.targets) {
    if (!target.startsWith(scheme)) c.problem(`${key}.protocol`, `${u.protocol} needs ${scheme}// targets (${target} is not)`);
  }
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

const DEFAULT_TIMEOUTS: Timeouts = {
  connectMs: numberDefault('upstreams.<name>.timeouts.connectMs'),
  responseMs: numberDefault('upstreams.<name>.timeouts.responseMs'),
  idleMs: numberDefault('upstreams.<name>.timeouts.idleMs'),
};

/** An upstream's or a route's timeouts (the route's fall back to its upstream's). */
function readTimeouts(c: Checker, key: string, t: Record<string, unknown>, defaults: Timeouts): Timeouts {
  c.unknownKeys(key, t, childrenOf('upstreams.<name>.timeouts'));
  return {
    connectMs: int(c, 'upstreams.<name>.timeouts.connectMs', t.connectMs, defaults.connectMs, `${key}.connectMs`),
    responseMs: int(c, 'upstreams.<name>.timeouts.responseMs', t.responseMs, defaults.responseMs, `${key}.responseMs`),
    idleMs: int(c, 'upstreams.<name>.timeouts.idleMs', t.idleMs, defaults.idleMs, `${key}.idleMs`),
  };
}


function readRoutes(c: Checker, raw: unknown, upstreams: Record<string, UpstreamConfig>, groupsFile: string | undefined): RouteConfig[] {
  const seen = new Map<string, string>();
  return c.list('routes', raw).map((value, i) => {
    const key = `routes[${i}]`;
    const r = c.obj(key, value, true);
    c.unknownKeys(key, r, childrenOf('routes[]'));
    // websocket and login are set only when written (undefined: the default, read where they are used).
    const plain = readScalars(c, 'routes[]', r, { as: key, except: ['websocket', 'login'] });
    const { path, upstream } = plain;
    if (path && !/^\/(?:[A-Za-z0-9._~-]+\/)*[A-Za-z0-9._~-]+$/.test(path)) {
      c.problem(`${key}.path`, 'must be an absolute path of plain segments without a trailing slash, e.g. /v1/conversations');
    } else if (path.toLowerCase().startsWith('/v1/tokens')) {
      c.problem(`${key}.path`, 'must not be under /v1/tokens (served by the gateway itself)');
    }
    // Routes match without regard to case (src/proxy/route-table.ts): /api/Admin repeats /api/admin.
    const earlier = seen.get(path.toLowerCase());
    if (earlier === path) c.problem(`${key}.path`, `repeats ${path}`);
    else if (earlier !== undefined) c.problem(`${key}.path`, `repeats ${earlier} (routes match without regard to case)`);
    seen.set(path.toLowerCase(), path);
    // Left out: a route matched only for its rules (forward-auth; checked with forwardAuth).
    if (upstream && !upstreams[upstream]) c.problem(`${key}.upstream`, `names no upstream (known: ${Object.keys(upstreams).join(', ') || 'none'})`);
    const route: RouteConfig = {
      ...plain,
      // Always present, undefined for a rules-only route: every route object has one shape.
      upstream,
      timeouts: readTimeouts(c, `${key}.timeouts`, c.obj(`${key}.timeouts`, r.timeouts), (upstream && upstreams[upstream]?.timeouts) || DEFAULT_TIMEOUTS),
      allowHeaders: c.list(`${key}.allowHeaders`, r.allowHeaders).map((h, j) => {
        const name = c.str(`${key}.allowHeaders[${j}]`, h).toLowerCase();
        if (name && !OVERRIDE_HEADERS.includes(name)) c.problem(`${key}.allowHeaders[${j}]`, `must be one of the override headers the gateway removes (${OVERRIDE_HEADERS.join(', ')})`);
        return name;
      }),
    };
    if (r.paging !== undefined && r.paging !== false) route.paging = readPaging(c, `${key}.paging`, c.obj(`${key}.paging`, r.paging === true ? {} : r.paging));
    if (r.rateLimit === false || r.rateLimit === null) route.rateLimit = null;
    else if (r.rateLimit !== undefined) route.rateLimit = readRateLimit(c, `${key}.rateLimit`, c.obj(`${key}.rateLimit`, r.rateLimit));
    if (r.websocket !== undefined) route.websocket = bool(c, 'routes[].websocket', r.websocket, `${key}.websocket`);
    if (r.cors !== undefined && r.cors !== null && r.cors !== false) route.cors = readCors(c, `${key}.cors`, r.cors, DEFAULT_CORS_METHODS);
    const allow = readAllow(c, `${key}.allow`, r.allow, groupsFile);
    if (allow) route.allow = allow;
    if (r.login !== undefined && bool(c, 'routes[].login', r.login, `${key}.login`)) route.login = true;
    return route;
  });
}

function readPaging(c: Checker, key: string, p: Record<string, unknown>): PagingRules {
  c.unknownKeys(key, p, childrenOf('routes[].paging'));
  const sizes = p.sizes === undefined ? DEFAULT_PAGE_SIZES : c.list(`${key}.sizes`, p.sizes).map((s, i) => c.int(`${key}.sizes[${i}]`, s, 0));
  const { defaultSize } = readScalars(c, 'routes[].paging', p, { as: key });
  if (!sizes.includes(defaultSize)) c.problem(`${key}.defaultSize`, `must be one of ${key}.sizes (${sizes.join(', ')})`);
  const sortable = c.list(`${key}.sortable`, p.sortable).map((s, i) => {
    const prop = c.str(`${key}.sortable[${i}]`, s);
    if (prop && !/^[A-Za-z_][A-Za-z0-9_.]*$/.test(prop)) c.problem(`${key}.sortable[${i}]`, 'must be a property name (letters, digits, _ and .)');
    return prop;
  });
  return { sizes, defaultSize, sortable };
}

function readRateLimit(c: Checker, key: string, r: Record<string, unknown>): RateLimitRule {
  c.unknownKeys(key, r, childrenOf('rateLimit'));
  const rule = readScalars(c, 'rateLimit', r, { as: key });
  // A missing or bad `requests` is a problem already; the rule read on is 1 per window.
  return { ...rule, requests: rule.requests || 1 };
}

const DEFAULT_CORS_METHODS: string[] = [...SETTINGS['routes[].cors.methods'].default];
const DEFAULT_CORS_HEADERS: string[] = [...SETTINGS['routes[].cors.headers'].default];
const DEFAULT_CORS_EXPOSED: string[] = [...SETTINGS['routes[].cors.exposedHeaders'].default];
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A CORS block: origins are exact (scheme://host[:port], as browsers send them) or '*' without credentials. */
function readCors(c: Checker, key: string, raw: unknown, defaultMethods: string[]): CorsPolicy {
  const p = c.obj(key, raw);
  c.unknownKeys(key, p, childrenOf('routes[].cors'));
  const credentials = bool(c, 'routes[].cors.credentials', p.credentials, `${key}.credentials`);
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
    maxAgeSeconds: int(c, 'routes[].cors.maxAge', p.maxAge, undefined, `${key}.maxAge`),
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
  c.unknownKeys('log', l, childrenOf('log'));
  return readScalars(c, 'log', l);
}

/** `tracing`: absent or null for none (the OTEL_* variables may still turn tracing on). */
function readTracing(c: Checker, raw: unknown): TracingConfig | undefined {
  if (raw === undefined || raw === null) return undefined;
  const t = c.obj('tracing', raw);
  c.unknownKeys('tracing', t, childrenOf('tracing'));
  const plain = readScalars(c, 'tracing', t);
  const endpoint = t.endpoint === undefined || t.endpoint === null ? undefined : c.url('tracing.endpoint', t.endpoint, ['http:', 'https:']);
  let sampleRatio = numberDefault('tracing.sampleRatio');
  if (t.sampleRatio !== undefined && t.sampleRatio !== null) {
    const n = typeof t.sampleRatio === 'number' ? t.sampleRatio : Number.NaN;
    if (!(n >= 0 && n <= 1)) c.problem('tracing.sampleRatio', 'must be a number from 0 to 1');
    else sampleRatio = n;
  }
  const headers: Record<string, string> = {};
  const h = c.obj('tracing.headers', t.headers);
  for (const [name, value] of Object.entries(h)) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) c.problem(`tracing.headers.${name}`, 'is not a header name');
    else headers[name.toLowerCase()] = c.str(`tracing.headers.${name}`, value);
  }
  return { ...plain, endpoint, sampleRatio, headers };
}

/** `server.tls`: absent, null or false for plain HTTP. */
function readTls(c: Checker, raw: unknown, at: (p: string) => string): TlsConfig | undefined {
  if (raw === undefined || raw === null || raw === false) return undefined;
  const t = c.obj('server.tls', raw);
  c.unknownKeys('server.tls', t, childrenOf('server.tls'));
  const tls = readScalars(c, 'server.tls', t, { at });
  if (tls.crlFile !== undefined && tls.clientCa === undefined) c.problem('server.tls.crlFile', 'needs server.tls.clientCa (a CRL of client certificates)');
  return tls;
}

/** `admin`: default 127.0.0.1:9091, `false` for none. */
function readAdmin(c: Checker, raw: unknown): AdminConfig | false {
  if (raw === false || raw === 'false') return false;
  const a = c.obj('admin', raw);
  c.unknownKeys('admin', a, childrenOf('admin'));
  const admin: AdminConfig = readScalars(c, 'admin', a);
  if (admin.apiToken && Buffer.byteLength(admin.apiToken) < MIN_SECRET_BYTES) c.problem('admin.apiToken', `must be at least ${MIN_SECRET_BYTES} bytes long`);
  return admin;
}

// Readers of one setting with its default and bounds from the table; `key` is the key as written when it
// differs from the table's path (an upstream's name, a route's index).

function int(c: Checker, path: SettingKey, value: unknown, fallback?: number, key: string = path): number {
  const s: Setting = setting(path);
  return c.int(key, value, fallback ?? numberDefault(path), s.min ?? 1, s.max ?? Number.MAX_SAFE_INTEGER);
}

function bool(c: Checker, path: SettingKey, value: unknown, key: string = path): boolean {
  const d = setting(path).default;
  if (typeof d !== 'boolean') throw new Error(`${path} has no boolean default in the settings table`);
  return c.bool(key, value, d);
}

function oneOf(c: Checker, path: SettingKey, value: unknown, key: string = path): string {
  const s: Setting = setting(path);
  if (!s.values || typeof s.default !== 'string') throw new Error(`${path} has no values and default in the settings table`);
  return c.oneOf(key, value, s.values, s.default);
}
