import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { childrenOf, SETTINGS, type Setting } from '../../src/config/defaults.js';
import { REFERENCE_FILE, renderReference } from '../../src/config/reference.js';
import { parseConfig } from '../../src/config/load.js';
import { checkConfig } from '../../src/config/validate.js';
import { parse } from 'yaml';

const ROOT = join(import.meta.dirname, '../..');

describe('the configuration reference', () => {
  it('is the one generated from the settings table (run `npm run docs:config` after changing src/config/defaults.ts)', () => {
    expect(readFileSync(join(ROOT, REFERENCE_FILE), 'utf8')).toBe(renderReference());
  });

  it('lists every key of the table with its default', () => {
    const text = renderReference();
    for (const key of Object.keys(SETTINGS)) expect(text).toContain(`| \`${key}\` |`);
    expect(text).toContain('| `server.port` | integer, 0 to 65535 | `8080` |');
  });
});

describe('validation takes its defaults and known keys from the table', () => {
  const minimal = {
    users: { htpasswd: 'users.htpasswd' },
    tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
    upstreams: { up: { url: 'http://127.0.0.1:1', healthCheck: { path: '/health' } } },
    routes: [{ path: '/v1/things', upstream: 'up', paging: true, cors: { origins: ['https://app.example.com'] } }],
    rateLimit: { requests: 5 },
    server: { tls: { certFile: 'c.pem', keyFile: 'k.pem' } },
  };
  const { config, problems } = checkConfig(minimal, '', '/tmp');
  const withRedis = checkConfig({ ...minimal, store: { kind: 'redis', url: 'redis://127.0.0.1:6379' } }, '', '/tmp');
  const withIdentity = checkConfig({ ...minimal, identity: { assertion: { keyFile: 'assertion.pem' }, issuers: [{ name: 'corp', issuer: 'https://idp.example.com', audiences: ['gw'] }] } }, '', '/tmp');
  const issuer = withIdentity.config.identity.issuers[0];
  const withLdap = checkConfig({ ...minimal, users: { ldap: { url: 'ldap://127.0.0.1', userDn: 'uid={user},dc=x' } } }, '', '/tmp');
  const withKeys = checkConfig({ ...minimal, apiKeys: {} }, '', '/tmp');
  const withTracing = checkConfig({ ...minimal, tracing: { endpoint: 'http://collector:4318' } }, '', '/tmp');
  const withLogin = checkConfig({ ...minimal, identity: { issuers: [{ name: 'corp', issuer: 'https://idp.example.com', audiences: ['gw'] }] }, login: { issuer: 'corp', clientId: 'gw' } }, '', '/tmp');
  const login = withLogin.config.login;
  const redis = withRedis.config.store.kind === 'redis' ? withRedis.config.store : undefined;

  /** Every table key with a plain default, read back from the validated configuration. */
  const read: Record<string, unknown> = {
    'server.host': config.server.host, 'server.port': config.server.port, 'server.shutdownGraceMs': config.server.shutdownGraceMs,
    'server.headersTimeoutMs': config.server.headersTimeoutMs, 'server.bodyTimeoutMs': config.server.bodyTimeoutMs,
    'server.maxPipelinedRequests': config.server.maxPipelinedRequests,
    'server.h2c': config.server.h2c,
    'server.trustProxy': config.server.trustProxy, 'server.workers': config.server.workers,
    'server.acceptGraceMs': config.server.acceptGraceMs, 'store.durability': redis?.durability,
    'upstreams.<name>.maxConnections': config.upstreams.up!.maxConnections, 'upstreams.<name>.maxQueued': config.upstreams.up!.maxQueued, 'upstreams.<name>.maxTunnels': config.upstreams.up!.maxTunnels,
    'identity.assertion.header': withIdentity.config.identity.assertion?.header,
    'apiKeys.header': withKeys.config.apiKeys?.header, 'apiKeys.prefix': withKeys.config.apiKeys?.prefix,
    'identity.assertion.alg': withIdentity.config.identity.assertion?.alg,
    'identity.assertion.ttlSeconds': withIdentity.config.identity.assertion?.ttlSeconds,
    'identity.issuers[].algorithms': issuer?.algorithms, 'identity.issuers[].userClaim': issuer?.userClaim,
    'identity.issuers[].clockSkewSeconds': issuer?.clockSkewSeconds,
    'server.tls.reloadIntervalMs': config.server.tls?.reloadIntervalMs, 'server.tls.http2': config.server.tls?.http2,
    'server.http2.maxConcurrentStreams': config.server.http2.maxConcurrentStreams,
    'server.http2.maxHeaderListBytes': config.server.http2.maxHeaderListBytes,
    'server.tls.clientCerts': config.server.tls?.clientCerts, 'server.tls.userFrom': config.server.tls?.userFrom,
    'login.scopes': login?.scopes, 'login.callbackPath': login?.callbackPath, 'login.logoutPath': login?.logoutPath,
    'login.backchannelLogoutPath': login?.backchannelLogoutPath, 'login.sessionTtlSeconds': login?.sessionTtlSeconds,
    'login.logoutTokenMaxAgeSeconds': login?.logoutTokenMaxAgeSeconds, 'login.local': login?.local, 'login.signInPath': login?.signInPath, 'login.mePath': login?.mePath, 'login.providers[].scopes': login?.providers[0]?.scopes,
    'login.page.title': login?.page.title,
    'login.cookieName': login?.cookieName, 'routes[].login': config.routes[0]!.login ?? false,
    'store.kind': config.store.kind,
    'store.keyPrefix': redis?.keyPrefix, 'store.commandTimeoutMs': redis?.commandTimeoutMs,
    'store.connectTimeoutMs': redis?.connectTimeoutMs, 'store.livenessCacheMs': redis?.livenessCacheMs,
    'store.writeLegacySessions': redis?.writeLegacySessions,
    'users.cacheTtlSeconds': config.users.cacheTtlSeconds, 'users.store': config.users.store, 'users.watch': config.users.watch,
    'users.maxPendingVerifications': config.users.maxPendingVerifications,
    'users.ldap.startTls': withLdap.config.users.ldap?.startTls, 'users.ldap.groupsFilter': withLdap.config.users.ldap?.groupsFilter,
    'users.ldap.cacheSeconds': withLdap.config.users.ldap?.cacheSeconds,
    'tokens.issuer': config.tokens.issuer, 'tokens.audience': config.tokens.audience,
    'tokens.accessTtlSeconds': config.tokens.accessTtlSeconds, 'tokens.refreshTtlSeconds': config.tokens.refreshTtlSeconds,
    'tokens.refreshReuseGraceSeconds': config.tokens.refreshReuseGraceSeconds, 'tokens.signing.alg': config.tokens.signing.alg,
    'tokens.verificationKeys': config.tokens.verificationKeys,
    'lockout.maxFailuresPerUser': config.lockout.maxFailuresPerUser, 'lockout.maxFailuresPerAccount': config.lockout.maxFailuresPerAccount,
    'lockout.windowSeconds': config.lockout.windowSeconds, 'lockout.addressBurst': config.lockout.addressBurst,
    'lockout.addressFailuresPerMinute': config.lockout.addressFailuresPerMinute,
    'rateLimit.windowSeconds': config.rateLimit?.windowSeconds,
    'upstreams.<name>.protocol': config.upstreams.up!.protocol,
    'upstreams.<name>.balance': config.upstreams.up!.balance, 'upstreams.<name>.cooldownMs': config.upstreams.up!.cooldownMs,
    'upstreams.<name>.timeouts.connectMs': config.upstreams.up!.timeouts.connectMs,
    'upstreams.<name>.timeouts.responseMs': config.upstreams.up!.timeouts.responseMs,
    'upstreams.<name>.timeouts.idleMs': config.upstreams.up!.timeouts.idleMs,
    'upstreams.<name>.preserveHost': config.upstreams.up!.preserveHost,
    'upstreams.<name>.healthCheck.intervalMs': config.upstreams.up!.healthCheck?.intervalMs,
    'upstreams.<name>.healthCheck.timeoutMs': config.upstreams.up!.healthCheck?.timeoutMs,
    'routes[].forwardAuthorization': config.routes[0]!.forwardAuthorization, 'routes[].stripPrefix': config.routes[0]!.stripPrefix,
    'routes[].allowHeaders': config.routes[0]!.allowHeaders,
    'routes[].paging.sizes': config.routes[0]!.paging?.sizes, 'routes[].paging.defaultSize': config.routes[0]!.paging?.defaultSize,
    'routes[].paging.sortable': config.routes[0]!.paging?.sortable,
    'routes[].cors.methods': config.routes[0]!.cors?.methods, 'routes[].cors.headers': config.routes[0]!.cors?.headers,
    'routes[].cors.exposedHeaders': config.routes[0]!.cors?.exposedHeaders, 'routes[].cors.credentials': config.routes[0]!.cors?.credentials,
    'routes[].cors.maxAge': config.routes[0]!.cors?.maxAgeSeconds,
    'log.level': config.log.level, 'log.access': config.log.access,
    'tracing.protocol': withTracing.config.tracing?.protocol, 'tracing.serviceName': withTracing.config.tracing?.serviceName,
    'tracing.sampleRatio': withTracing.config.tracing?.sampleRatio,
    'admin.host': config.admin ? config.admin.host : undefined, 'admin.port': config.admin ? config.admin.port : undefined,
  };

  it.each(Object.entries(read))('%s is the table\'s default', (key, value) => {
    expect([...problems, ...withRedis.problems, ...withIdentity.problems, ...withLdap.problems, ...withLogin.problems, ...withTracing.problems]).toEqual([]);
    expect(value).toEqual((SETTINGS as Record<string, Setting>)[key]!.default);
  });

  // Not read above: they need another topology or entry (sentinel, a verification key), or are absent
  // from the Config when not set (routes[].websocket: undefined means the default, true).
  const elsewhere = ['store.sentinel.tls', 'routes[].websocket', 'tokens.verificationKeys[].alg', 'routes'];

  it('every table key with a plain default is checked above', () => {
    const withDefault = Object.entries(SETTINGS as Record<string, Setting>)
      .filter(([key, s]) => s.default !== undefined && s.defaultText === undefined && !elsewhere.includes(key))
      .map(([key]) => key);
    expect(withDefault.filter((k) => !(k in read))).toEqual([]);
  });

  it('a key the table lists is accepted, one it does not is refused with the nearest', () => {
    expect(childrenOf('server')).toContain('workers');
    const { problems: p } = checkConfig({ ...minimal, server: { prot: 1 } }, '', '/tmp');
    expect(p).toContain('server.prot is not a known setting; did you mean port?');
  });
});

describe('the shipped config/gateway.yaml agrees with the reference', () => {
  const file = join(ROOT, 'config/gateway.yaml');
  const text = readFileSync(file, 'utf8');

  /** Every leaf the file sets, as the table's key path (`upstreams.contacts.url` → `upstreams.<name>.url`). */
  function leaves(value: unknown, key: string, out: Array<[string, unknown]>): Array<[string, unknown]> {
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) leaves(v, key ? `${key}.${k}` : k, out);
    } else if (Array.isArray(value) && key === 'routes') {
      value.forEach((v) => leaves(v, 'routes[]', out));
    } else {
      out.push([key.replace(/^upstreams\.[^.]+/, 'upstreams.<name>'), value]);
    }
    return out;
  }

  it('carries no rate limit (none is the default): a demo or a first load test is not throttled to 429s', () => {
    const config = parseConfig(text, file, { GATEWAY_JWT_SECRET: 'x'.repeat(48) });
    expect(config.rateLimit).toBeUndefined();
  });

  it('sets nothing to a value other than its default, except what must be set and the choices listed here', () => {
    // What a deployment must choose, and the shipped file's deliberate choices (said in its comments).
    const chosen = new Set([
      'users.htpasswd', 'tokens.signing.secret', 'upstreams.<name>.url', 'routes[].path', 'routes[].upstream',
      'routes[].paging.sortable', 'upstreams.<name>.timeouts.responseMs', 'admin.host', 'admin.port',
    ]);
    const differing = leaves(parse(text), '', [])
      .filter(([key]) => !chosen.has(key))
      .filter(([key, value]) => {
        const s = (SETTINGS as Record<string, Setting>)[key];
        if (!s) return true;
        const fallback = key === 'server.trustProxy' ? false : s.default;
        return JSON.stringify(value) !== JSON.stringify(fallback);
      });
    expect(differing).toEqual([]);
  });
});
