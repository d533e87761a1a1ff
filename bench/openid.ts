// Issue 27's rows: the gateway with bearer tokens of an OpenID provider (RS256, keys cached: no
// outbound call per request) against the floor, and browser sessions (the sign-in cookie: a sealed
// handle opened from a cache, the session's liveness from the store's cache). Both run on one gateway
// process of their own, which has API keys configured too (issue 41: a provider's token is measured
// with every other bearer source on). The provider here is a small discovery + JWK Set server in the
// bench process (mini-provider.ts): the gateway fetches its keys once; what is measured is the gateway
// verifying tokens it holds keys for.
import { createSecretKey, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SESSION_PURPOSE } from '../src/auth/cookie-session.js';
import { Sealer } from '../src/auth/seal.js';
import { systemClock } from '../src/clock.js';
import { validateConfig } from '../src/config/validate.js';
import { createLogger } from '../src/log.js';
import { createStore } from '../src/stores/kinds.js';
import { derivedKey } from '../src/tokens/keys.js';
import { type Bench, type Proc, type Row } from './context.js';
import { ADDRESS_BURST, call, LIST_PATH, startGateway, type GatewaySetup } from './gateway.js';
import { issuerEntry, miniProvider } from './mini-provider.js';
import { rssMb, stopChild } from './procs.js';
import { againstFloor, warmUp, type Goal } from './throughput.js';

/** Issue 41: a provider's RS256 token, with API keys and an issuer configured: ≥ 0.80 × the floor's throughput, CPU ≤ 1.25 ×. */
const PROVIDER_BEARER_GOAL: Goal = { ratio: 0.8, cpuRatio: 1.25 };
const USER = 'bench-oidc';

function writeOpenidFiles(setup: GatewaySetup, issuer: string, refreshSecret: string): GatewaySetup {
  const configFile = join(setup.dir, 'gateway-openid.yaml');
  writeFileSync(configFile, `# written by bench/openid.ts
server: { host: 127.0.0.1, port: 8080, trustProxy: false, shutdownGraceMs: 1000 }
store: { kind: redis, url: "\${REDIS_URL}" }
users: { htpasswd: users.htpasswd, cacheTtlSeconds: 300 }
tokens:
  issuer: auth-gateway
  audience: auth-gateway
  signing: { alg: HS256, secret: "\${GATEWAY_JWT_SECRET}" }
  refreshSecret: "${refreshSecret}"
lockout: { maxFailuresPerUser: 10, addressBurst: ${ADDRESS_BURST}, addressFailuresPerMinute: 30, windowSeconds: 900 }
identity:
  issuers:
    - ${issuerEntry(issuer)}
login: { issuer: bench, clientId: gateway }
apiKeys: {}
upstreams:
  conversations: { url: "http://127.0.0.1:${setup.upstreamPort}", timeouts: { responseMs: 10000 } }
routes:
  - { path: /v1/conversations, upstream: conversations, paging: { sortable: [campaignId] } }
log: { level: warn, access: false }
admin: { host: 127.0.0.1, port: 0 }
`);
  return { ...setup, configFile, logFile: join(setup.dir, 'gateway-openid.log') };
}

/**
 * A browser session as the sign-in callback makes one: a session in the bench's Redis (through the
 * gateway's own store code) and its handle sealed under the key every instance derives from
 * tokens.refreshSecret.
 */
async function sessionCookie(redisUrl: string, refreshSecret: string): Promise<string> {
  const config = validateConfig({ store: { kind: 'redis', url: redisUrl }, users: { htpasswd: 'unused' }, tokens: { signing: { alg: 'HS256', secret: 'unused-unused-unused-unused-unused-0' } } }, '', '/');
  const store = createStore(config.store, systemClock, createLogger('silent'));
  try {
    await store.waitUntilReady(5000);
    const sid = await store.createSession({ sub: USER, uv: 'oidc' }, 3600);
    // With tokens.refreshSecret set the signing key does not enter the derivation.
    const sealer = new Sealer(derivedKey(refreshSecret, createSecretKey(randomBytes(32)), 'sign-in cookies v1'));
    return `__Host-gateway=${sealer.seal(SESSION_PURPOSE, { sid, user: USER, groups: ['staff'], exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  } finally {
    await store.close();
  }
}

/** Both rows on one gateway process: `oidc-bearer` (goal 0.80 of the floor), then `oidc-session`. */
export async function openidScenarios(b: Bench): Promise<Row[]> {
  const provider = await miniProvider();
  const refreshSecret = randomBytes(32).toString('base64url');
  const setup = writeOpenidFiles(b.gatewaySetup, provider.issuer, refreshSecret);
  const gw = await startGateway(setup, b.redisUrl);
  try {
    const bearer = `Bearer ${provider.token(USER)}`;
    const cookie = await sessionCookie(b.redisUrl, refreshSecret);
    for (const headers of [{ authorization: bearer }, { cookie }] as Array<Record<string, string>>) {
      const check = await call(gw.origin, 'GET', LIST_PATH, headers);
      if (check.status !== 200) throw new Error(`openid: the gateway answered ${check.status} ${check.body}; see ${setup.logFile}`);
    }
    const proc: Proc = { name: 'openid', origin: gw.origin, pid: gw.child.pid! };
    await warmUp(b, proc, bearer);
    const rows: Row[] = [];
    const bearerRow = await againstFloor(b, 'oidc-bearer', 'Bearer GET /v1/conversations with an OpenID provider\'s RS256 access token (keys cached)', proc, bearer, PROVIDER_BEARER_GOAL);
    bearerRow.notes.unshift('identity.issuers: one RS256 key fetched at start (max-age 3600); the token is verified once (signature, aud, exp, the user and groups claims), then taken from the cache of verified tokens (exp checked again); API keys and login configured too');
    rows.push(bearerRow);
    const sessionRow = await againstFloor(b, 'oidc-session', 'GET /v1/conversations with a browser session cookie (login: sealed handle, liveness cache)', proc, { cookie }, null);
    sessionRow.notes.unshift('the cookie opens from a cache of opened handles; the session is live per the store\'s liveness cache (no Redis round trip per request)');
    sessionRow.notes.push(`RSS of this gateway process after its rounds: ${(await rssMb(proc.pid)).toFixed(1)} MB`);
    rows.push(sessionRow);
    return rows;
  } finally {
    await stopChild(gw.child, 10_000);
    await provider.close();
  }
}
