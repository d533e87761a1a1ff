// The gateway under test: its temp configuration and users, the process, and the HTTP calls the
// scenarios need to set themselves up (token pairs, one Basic request).
import { hashSync } from '../src/credentials/bcrypt.js';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, openSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { issuerEntry } from './mini-provider.js';
import { freePort, spawnTracked, waitFor } from './procs.js';

export const LIST_PATH = '/v1/conversations?size=20&sort=campaignId,desc';
export const USER = 'bench';
/** Used only by the Basic scenario, so its first request is a real bcrypt. */
export const BASIC_USER = 'bench-basic';
export const CREATE_USER_PREFIX = 'bench-u';
/**
 * The shipped default lockout per client address. The flood comes from one client (127.0.0.1), as in
 * the issue, so after this many wrong passwords it gets cheap 429s; bearer requests never consult the
 * lockout, so the shared address does not touch their result.
 */
export const ADDRESS_BURST = 10;

export interface GatewaySetup {
  dir: string;
  upstreamPort: number;
  configFile: string;
  /** The gateway's stdout and stderr: warnings, and the access log when it is on. */
  logFile: string;
  password: string;
  /** Users bench-u0 … bench-u(N-1), all with the bench password: every token create costs one bcrypt. */
  createUsers: number;
  /** The listener is TLS (a variant with `tls`): its origin is https://. */
  https?: boolean;
}

/** What a gateway process of the bench is configured with beyond the defaults (access log off, no rate limit). */
export interface GatewayVariant {
  /** Names the config and log files: gateway-NAME.yaml, gateway-NAME.log. */
  name: string;
  /** `log: { level: info, access: true }`: one JSON line per request to stdout, a file here. */
  accessLog?: boolean;
  /** A global `rateLimit`: every proxied request costs one Redis round trip (GCRA script). */
  rateLimit?: { requests: number; windowSeconds: number };
  /** `apiKeys: {}`: API keys of the store accepted (bench/variants.ts makes one with the CLI). */
  apiKeys?: boolean;
  /** `identity.issuers`: one OpenID provider (bench/mini-provider.ts) of this issuer URL, whose bearer tokens are accepted. */
  issuer?: string;
  /** `server.tls` (HTTP/2 and HTTP/1.1 over TLS, the default `http2: true`) with this certificate and key. */
  tls?: { certFile: string; keyFile: string };
  /** `users.ldap`: a directory beside the htpasswd file, direct bind with this DN template. */
  ldap?: { url: string; userDn: string };
  /** `tracing`: OTLP/HTTP export to this collector base URL with this sample ratio. */
  tracing?: { endpoint: string; sampleRatio: number };
  /**
   * An h2c upstream (bench/grpc-upstream.ts) on this port: `/v1/conversations` is forwarded to it over
   * HTTP/2, and `/bench.Echo` (gRPC) too; with `server.h2c` on.
   */
  h2cUpstreamPort?: number;
}

/** Writes the htpasswd (cost-10 bcrypt) and the YAML of the main gateway (access log off, no rate limit). */
export function writeGatewayFiles(dir: string, upstreamPort: number, createUsers: number): GatewaySetup {
  const password = randomBytes(12).toString('base64url');
  const hash = hashSync(password, { cost: 10 });
  // One hash for all create users: the verifier caches per user name, so each name still costs a bcrypt.
  const lines = [`${USER}:${hash}`, `${BASIC_USER}:${hash}`];
  for (let i = 0; i < createUsers; i++) lines.push(`${CREATE_USER_PREFIX}${i}:${hash}`);
  writeFileSync(join(dir, 'users.htpasswd'), lines.join('\n') + '\n');
  const configFile = join(dir, 'gateway.yaml');
  writeFileSync(configFile, configYaml(upstreamPort, { name: 'main' }));
  return { dir, upstreamPort, configFile, logFile: join(dir, 'gateway.log'), password, createUsers };
}

/** Another gateway configuration next to the main one: same users and upstream, its own YAML and log file. */
export function writeVariantFiles(setup: GatewaySetup, variant: GatewayVariant): GatewaySetup {
  const configFile = join(setup.dir, `gateway-${variant.name}.yaml`);
  writeFileSync(configFile, configYaml(setup.upstreamPort, variant));
  return { ...setup, configFile, logFile: join(setup.dir, `gateway-${variant.name}.log`), https: variant.tls !== undefined };
}

function configYaml(upstreamPort: number, variant: GatewayVariant): string {
  const log = variant.accessLog ? '{ level: info, access: true }' : '{ level: warn, access: false }';
  const limit = variant.rateLimit ? `rateLimit: { requests: ${variant.rateLimit.requests}, windowSeconds: ${variant.rateLimit.windowSeconds} }\n` : '';
  const keys = variant.apiKeys ? 'apiKeys: {}\n' : '';
  const identity = variant.issuer ? `identity:\n  issuers:\n    - ${issuerEntry(variant.issuer)}\n` : '';
  const tracing = variant.tracing ? `tracing: { endpoint: "${variant.tracing.endpoint}", sampleRatio: ${variant.tracing.sampleRatio} }\n` : '';
  const tls = variant.tls ? `, tls: { certFile: "${variant.tls.certFile}", keyFile: "${variant.tls.keyFile}" }` : '';
  const ldap = variant.ldap ? `, ldap: { url: "${variant.ldap.url}", userDn: "${variant.ldap.userDn}", cacheSeconds: 300 }` : '';
  const h2 = variant.h2cUpstreamPort;
  const h2c = h2 ? ', h2c: true' : '';
  const upstream = h2 ? `{ url: "http://127.0.0.1:${h2}", protocol: h2c, timeouts: { responseMs: 10000 } }` : `{ url: "http://127.0.0.1:${upstreamPort}", timeouts: { responseMs: 10000 } }`;
  const grpcRoute = h2 ? '  - { path: /bench.Echo, upstream: conversations }\n' : '';
  return `# written by bench/run.ts (${variant.name})
server: { host: 127.0.0.1, port: 8080, trustProxy: false, shutdownGraceMs: 1000${tls}${h2c} }
store: { kind: redis, url: "\${REDIS_URL}" }
users: { htpasswd: users.htpasswd, cacheTtlSeconds: 300${ldap} }
tokens:
  issuer: auth-gateway
  audience: auth-gateway
  signing: { alg: HS256, secret: "\${GATEWAY_JWT_SECRET}" }
lockout: { maxFailuresPerUser: 10, addressBurst: ${ADDRESS_BURST}, addressFailuresPerMinute: 30, windowSeconds: 900 }
${limit}${keys}${identity}${tracing}upstreams:
  conversations: ${upstream}
routes:
  - { path: /v1/conversations, upstream: conversations, paging: { sortable: [campaignId] } }
${grpcRoute}log: ${log}
admin: { host: 127.0.0.1, port: 0 }
`;
}

/** Starts `node dist/src/main.js serve --config FILE` and waits for /healthz. */
export async function startGateway(setup: GatewaySetup, redisUrl: string, profileDir?: string): Promise<{ child: ChildProcess; origin: string }> {
  const main = fileURLToPath(new URL('../src/main.js', import.meta.url));
  const port = await freePort();
  const log = openSync(setup.logFile, 'a');
  const flags = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const child = spawnTracked(process.execPath, [...flags, main, 'serve', '--config', setup.configFile], {
    stdio: ['ignore', log, log],
    env: { ...process.env, GATEWAY_JWT_SECRET: randomBytes(48).toString('base64'), REDIS_URL: redisUrl, PORT: String(port) },
  });
  const origin = `${setup.https ? 'https' : 'http'}://127.0.0.1:${port}`;
  const exited = new Promise<false>((resolve) => child.once('exit', () => resolve(false)));
  const healthy = waitFor(async () => (await call(origin, 'GET', '/healthz').catch(() => ({ status: 0 }))).status === 200, 15_000);
  if (!(await Promise.race([healthy, exited]))) throw new Error(`the gateway did not become healthy; see ${setup.logFile}`);
  return { child, origin };
}

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  ms: number;
}

/** One request on a fresh connection (set-up only, never under measurement); https:// without checking the bench's own certificate. */
export function call(origin: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Reply> {
  const url = new URL(origin);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const options = { host: url.hostname, port: url.port, method, path, headers: { ...headers, connection: 'close' } };
    const onResponse = (res: IncomingMessage) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, ms: performance.now() - started }));
    };
    const req = url.protocol === 'https:' ? httpsRequest({ ...options, rejectUnauthorized: false }, onResponse) : httpRequest(options, onResponse);
    req.setTimeout(15_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.once('error', reject);
    req.end(body);
  });
}

export async function createTokens(origin: string, user: string, password: string): Promise<{ accessToken: string; refreshToken: string }> {
  const reply = await call(origin, 'POST', '/v1/tokens/create', { 'content-type': 'application/json' }, JSON.stringify({ appKey: user, appSecret: password }));
  if (reply.status !== 200) throw new Error(`POST /v1/tokens/create answered ${reply.status}: ${reply.body}`);
  return JSON.parse(reply.body) as { accessToken: string; refreshToken: string };
}

export function basicHeader(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}
