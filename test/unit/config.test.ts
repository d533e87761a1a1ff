import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { parseConfig } from '../../src/config/load.js';

const SECRET = 's'.repeat(40);
const BASE = `
users: { htpasswd: users.htpasswd }
tokens:
  signing: { alg: HS256, secret: "\${JWT_SECRET}" }
upstreams:
  conversations: { url: "http://127.0.0.1:9001" }
routes:
  - { path: /v1/conversations, upstream: conversations, paging: { sortable: [campaignId] } }
`;

function problems(yaml: string, env: Record<string, string> = { JWT_SECRET: SECRET }): string[] {
  try {
    parseConfig(yaml, '/etc/gw/gateway.yaml', env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('configuration', () => {
  it('applies the documented defaults', () => {
    const c = parseConfig(BASE, '/etc/gw/gateway.yaml', { JWT_SECRET: SECRET });
    expect(c.server).toEqual({ host: '0.0.0.0', port: 8080, trustProxy: 0, shutdownGraceMs: 10000, acceptGraceMs: 5000, headersTimeoutMs: 10000, bodyTimeoutMs: 10000, maxPipelinedRequests: 1000, workers: 1, h2c: false, http2: { maxConcurrentStreams: 100, maxHeaderListBytes: 16384 } });
    expect(c.store).toEqual({ kind: 'memory' });
    expect(c.users.htpasswd).toBe('/etc/gw/users.htpasswd');
    expect(c.tokens).toMatchObject({ issuer: 'auth-gateway', accessTtlSeconds: 5400, refreshTtlSeconds: 5184000, refreshReuseGraceSeconds: 10 });
    expect(c.lockout).toEqual({ maxFailuresPerUser: 10, maxFailuresPerAccount: 100, windowSeconds: 900, addressBurst: 10, addressFailuresPerMinute: 30 });
    expect(c.upstreams.conversations).toEqual({
      url: 'http://127.0.0.1:9001', targets: ['http://127.0.0.1:9001'], balance: 'round-robin', cooldownMs: 10000,
      protocol: 'http1', preserveHost: false, maxConnections: 256, maxQueued: 1024, maxTunnels: 4096, timeouts: { connectMs: 5000, responseMs: 30000, idleMs: 60000 },
    });
    expect(c.routes[0]).toEqual({
      path: '/v1/conversations', upstream: 'conversations', forwardAuthorization: false, stripPrefix: false, allowHeaders: [],
      timeouts: { connectMs: 5000, responseMs: 30000, idleMs: 60000 },
      paging: { sizes: [10, 20, 50, 100, 200], defaultSize: 20, sortable: ['campaignId'] },
    });
  });

  it('refuses to start without a signing secret: there is no built-in default', () => {
    expect(problems(BASE, {})).toEqual(['tokens.signing.secret uses ${JWT_SECRET}, which is not set in the environment']);
    expect(problems(BASE.replace('"${JWT_SECRET}"', '""'))[0]).toMatch(/^tokens\.signing\.secret \(line 4, column 26\) is required/);
    expect(problems(BASE.replace('"${JWT_SECRET}"', 'short'))).toEqual(['tokens.signing.secret (line 4, column 26) must be at least 32 bytes long; found (hidden)']);
  });

  it('lists every problem at once, each naming its key', () => {
    const yaml = `
server: { port: 99999, trustProxy: maybe }
store: { kind: postgres }
users: {}
tokens:
  accessTtlSeconds: -5
  refreshReuseGraceSeconds: 1.5
  signing: { alg: none }
lockout: { windowSeconds: 0 }
upstreams:
  a: { url: "ftp://x", timeoutMs: abc }
routes:
  - { path: "v1/x", upstream: b }
  - { path: /v1/y, upstream: a, paging: { sizes: [10], defaultSize: 20, sortable: ["bad prop"] } }
colour: blue
`;
    expect(problems(yaml, {})).toEqual([
      'colour (line 15, column 1) is not a known setting',
      'server.port (line 2, column 11) must be a non-negative integer no greater than 65535; found 99999',
      'server.trustProxy (line 2, column 24) must be a non-negative integer no greater than 32; found "maybe"',
      'store.kind (line 3, column 10) must be one of memory, redis; found "postgres"',
      'users.htpasswd is required',
      'tokens.accessTtlSeconds (line 6, column 3) must be a positive integer; found -5',
      'tokens.refreshReuseGraceSeconds (line 7, column 3) must be a non-negative integer no greater than 3600; found 1.5',
      'tokens.signing.alg (line 8, column 14) must be one of HS256, RS256, ES256; found "none"',
      expect.stringMatching(/^tokens\.signing\.secret is required/),
      'lockout.windowSeconds (line 9, column 12) must be a positive integer; found 0',
      'upstreams.a.url (line 11, column 8) must be a http: or https: URL; found "ftp://x"',
      'upstreams.a.timeoutMs (line 11, column 24) must be a positive integer; found "abc"',
      'routes[0].path (line 13, column 7) must be an absolute path of plain segments without a trailing slash, e.g. /v1/conversations; found "v1/x"',
      'routes[0].upstream (line 13, column 21) names no upstream (known: a)',
      'routes[1].paging.defaultSize (line 14, column 56) must be one of routes[1].paging.sizes (10); found 20',
      'routes[1].paging.sortable[0] (line 14, column 84) must be a property name (letters, digits, _ and .); found "bad prop"',
    ]);
  });

  it('substitutes ${VAR} and ${VAR:-default} after parsing, so a value cannot inject YAML', () => {
    const yaml = BASE.replace('"http://127.0.0.1:9001"', '"${UP:-http://127.0.0.1:9002}"') + 'log: { level: "${LEVEL}" }\n';
    const c = parseConfig(yaml, '/x/gateway.yaml', { JWT_SECRET: SECRET, LEVEL: 'warn' });
    expect(c.upstreams.conversations!.url).toBe('http://127.0.0.1:9002');
    expect(c.log.level).toBe('warn');
    const injected = parseConfig(BASE, '/x/gateway.yaml', { JWT_SECRET: `${SECRET}"\nserver: { port: 1 }` });
    expect(injected.server.port).toBe(8080);
  });

  it('lets REDIS_URL select the redis store and PORT override the port', () => {
    const c = parseConfig(BASE, '/x/gateway.yaml', { JWT_SECRET: SECRET, REDIS_URL: 'redis://redis:6379', PORT: '9090' });
    expect(c.store).toEqual({
      kind: 'redis', topology: { mode: 'single', url: 'redis://redis:6379' }, keyPrefix: 'gw:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0, durability: 'available', writeLegacySessions: true,
    });
    expect(c.server.port).toBe(9090);
    expect(problems(BASE, { JWT_SECRET: SECRET, REDIS_URL: 'http://nope' })).toEqual(['store.url (set by REDIS_URL) must be a redis: or rediss: URL; found "http://nope"']);
  });

  it('reads upstream pools: targets, balance, health check; url and targets are exclusive', () => {
    const pool = BASE.replace('conversations: { url: "http://127.0.0.1:9001" }',
      'conversations: { targets: ["http://10.0.0.1:9001", "http://10.0.0.2:9001"], balance: least-requests, healthCheck: { path: /healthz } }');
    const c = parseConfig(pool, '/x/gateway.yaml', { JWT_SECRET: SECRET });
    expect(c.upstreams.conversations).toMatchObject({
      url: 'http://10.0.0.1:9001', targets: ['http://10.0.0.1:9001', 'http://10.0.0.2:9001'], balance: 'least-requests',
      healthCheck: { path: '/healthz', intervalMs: 5000, timeoutMs: 2000 },
    });
    const both = BASE.replace('conversations: { url: "http://127.0.0.1:9001" }', 'conversations: { url: "http://a:1", targets: ["http://b:1"] }');
    expect(problems(both, { JWT_SECRET: SECRET })).toEqual(['upstreams.conversations (line 6, column 3) has both url and targets: give one target as url or several as targets']);
    const bad = BASE.replace('conversations: { url: "http://127.0.0.1:9001" }', 'conversations: { targets: ["ftp://x"], balance: random, healthCheck: { path: healthz } }');
    expect(problems(bad, { JWT_SECRET: SECRET })).toEqual([
      'upstreams.conversations.targets[0] (line 6, column 30) must be a http: or https: URL; found "ftp://x"',
      'upstreams.conversations.balance (line 6, column 42) must be one of round-robin, least-requests; found "random"',
      'upstreams.conversations.healthCheck.path (line 6, column 74) must start with /; found "healthz"',
    ]);
  });

  it('reads an upstream\'s protocol and caFile; h2c needs http: targets, h2 https: ones; server.h2c is for the plain listener', () => {
    const h2 = BASE.replace('conversations: { url: "http://127.0.0.1:9001" }', 'conversations: { url: "https://10.0.0.1:9001", protocol: h2, caFile: ca.pem }');
    expect(parseConfig(h2, '/x/gateway.yaml', { JWT_SECRET: SECRET }).upstreams.conversations).toMatchObject({ protocol: 'h2', caFile: '/x/ca.pem' });
    const wrong = (protocol: string, url: string) => BASE.replace('conversations: { url: "http://127.0.0.1:9001" }', `conversations: { url: "${url}", protocol: ${protocol} }`);
    expect(problems(wrong('h2c', 'https://a:1'))).toEqual(['upstreams.conversations.protocol (line 6, column 40) h2c needs http:// targets (https://a:1 is not)']);
    expect(problems(wrong('h2', 'http://a:1'))).toEqual(['upstreams.conversations.protocol (line 6, column 39) h2 needs https:// targets (http://a:1 is not)']);
    expect(problems(wrong('http3', 'http://a:1'))).toEqual(['upstreams.conversations.protocol (line 6, column 39) must be one of http1, h2c, h2; found "http3"']);
    expect(problems(BASE + 'server: { h2c: true, tls: { certFile: c.pem, keyFile: k.pem } }\n').join('\n')).toMatch(/^server\.h2c \(line \d+, column \d+\) is for the plain listener: with server\.tls, HTTP\/2 is server\.tls\.http2$/m);
  });

  it('reads server.workers as a number or auto (the cores)', () => {
    const withWorkers = (w: string) => BASE + `server: { workers: ${w} }\nstore: { kind: redis, url: "redis://r:6379" }\n`;
    expect(parseConfig(withWorkers('4'), '/x/gateway.yaml', { JWT_SECRET: SECRET }).server.workers).toBe(4);
    expect(parseConfig(withWorkers('auto'), '/x/gateway.yaml', { JWT_SECRET: SECRET }).server.workers).toBe(availableParallelism());
    expect(problems(withWorkers('0'))).toEqual(['server.workers (line 9, column 11) must be a positive integer no greater than 256; found 0']);
    expect(problems(BASE + 'server: { workers: 2 }\n')).toEqual([
      'server.workers (line 9, column 11) needs store.kind redis: with the memory store each worker would have its own sessions',
    ]);
  });

  it('reads a Redis Cluster or a Sentinel store, exactly one topology, and no hash tag in the prefix', () => {
    const withStore = (store: string) => BASE.replace(/store:.*\n/, '') + `store: ${store}\n`;
    const cluster = parseConfig(withStore('{ kind: redis, cluster: { nodes: ["redis://:pw@10.0.0.1:6379", "redis://10.0.0.2:6379"] } }'), '/x/gateway.yaml', { JWT_SECRET: SECRET });
    expect(cluster.store).toMatchObject({ kind: 'redis', topology: { mode: 'cluster', nodes: ['redis://:pw@10.0.0.1:6379', 'redis://10.0.0.2:6379'] }, waitForReplicas: 0 });
    const sentinel = parseConfig(withStore('{ kind: redis, sentinel: { name: gw, sentinels: ["10.0.0.5:26379", "10.0.0.6:26379"], password: p, sentinelPassword: q } }'), '/x/gateway.yaml', { JWT_SECRET: SECRET });
    expect(sentinel.store).toMatchObject({
      kind: 'redis', topology: { mode: 'sentinel', name: 'gw', sentinels: ['10.0.0.5:26379', '10.0.0.6:26379'], password: 'p', sentinelPassword: 'q', tls: false }, waitForReplicas: 1,
    });
    expect(problems(withStore('{ kind: redis, url: "redis://a:6379", cluster: { nodes: ["redis://b:6379"] } }'))).toEqual([
      'store (line 9, column 1) sets url and cluster: set exactly one of url (or REDIS_URL), cluster, sentinel',
    ]);
    expect(problems(withStore('{ kind: redis, cluster: { nodes: [] }, keyPrefix: "{gw}:" }'))).toEqual([
      'store.cluster.nodes (line 9, column 34) must list at least one node URL',
      'store.keyPrefix (line 9, column 47) must not contain { or } (a hash tag would put every key in one cluster slot); found "{gw}:"',
    ]);
    expect(problems(withStore('{ kind: redis, sentinel: { sentinels: ["nohost"] } }'))).toEqual([
      'store.sentinel.sentinels[0] (line 9, column 47) must be host:port; found "nohost"',
      'store.sentinel.name is required',
    ]);
    expect(problems(withStore('{ kind: redis, cluster: { nodes: ["redis://b:6379"] }, waitForReplicas: 1 }'))).toEqual([
      'store.waitForReplicas (line 9, column 63) is not supported with store.cluster (WAIT has no key to route by)',
    ]);
    // REDIS_URL is the single-node form: with a cluster or sentinel in the file it is refused, not ignored.
    expect(problems(withStore('{ kind: redis, sentinel: { name: gw, sentinels: ["s:26379"] } }'), { JWT_SECRET: SECRET, REDIS_URL: 'redis://r:6379' })).toEqual([
      'store (line 9, column 1) sets url and sentinel: set exactly one of url (or REDIS_URL), cluster, sentinel',
    ]);
  });

  it('reads a global rate limit and per-route overrides', () => {
    const yaml = BASE.replace('routes:', 'rateLimit: { requests: 100 }\nroutes:') +
      '  - { path: /v1/a, upstream: conversations, rateLimit: false }\n  - { path: /v1/b, upstream: conversations, rateLimit: { requests: 5, windowSeconds: 1 } }\n';
    const c = parseConfig(yaml, '/x/gateway.yaml', { JWT_SECRET: SECRET });
    expect(c.rateLimit).toEqual({ requests: 100, windowSeconds: 60 });
    expect(c.routes.map((r) => r.rateLimit)).toEqual([undefined, null, { requests: 5, windowSeconds: 1 }]);
    expect(problems(BASE.replace('routes:', 'rateLimit: { windowSeconds: 0 }\nroutes:'))).toEqual([
      'rateLimit.requests is required',
      'rateLimit.windowSeconds (line 7, column 14) must be a positive integer; found 0',
    ]);
  });

  it('refuses routes under /v1/tokens and repeated routes', () => {
    const yaml = BASE + '  - { path: /v1/tokens/x, upstream: conversations }\n  - { path: /v1/conversations, upstream: conversations }\n';
    expect(problems(yaml)).toEqual([
      'routes[1].path (line 9, column 7) must not be under /v1/tokens (served by the gateway itself); found "/v1/tokens/x"',
      'routes[2].path (line 10, column 7) repeats /v1/conversations',
    ]);
  });

  it('refuses a route that repeats another in another case (routes match without regard to case)', () => {
    expect(problems(BASE + '  - { path: /V1/Conversations, upstream: conversations }\n')).toEqual([
      'routes[1].path (line 9, column 7) repeats /v1/conversations (routes match without regard to case)',
    ]);
  });

  it('refuses invalid YAML with the file name', () => {
    expect(problems('server: [')[0]).toMatch(/^\/etc\/gw\/gateway\.yaml is not valid YAML/);
  });
});
