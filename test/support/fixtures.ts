import { hashSync } from '../../src/credentials/bcrypt.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { validateConfig } from '../../src/config/validate.js';
import { createLogger } from '../../src/log.js';
import type { Config } from '../../src/config/types.js';
import { createGateway, type Gateway, type GatewayDeps } from '../../src/server.js';
import { startRedis, type RedisServerOptions, type TestRedis } from './redis-server.js';

export const SECRET = 'test-secret-test-secret-test-secret-0123456789';
/** Cost 4 keeps tests fast; the gateway treats every cost alike. */
export const TEST_COST = 4;

export interface Users {
  dir: string;
  file: string;
  write(users: Record<string, string>): void;
  remove(): void;
}

/** An htpasswd file in a temporary folder; `cost` is the bcrypt cost (TEST_COST unless a test times real hashes). */
export function htpasswd(users: Record<string, string>, cost = TEST_COST): Users {
  const dir = mkdtempSync(join(tmpdir(), 'gw-users-'));
  const file = join(dir, 'users.htpasswd');
  const write = (u: Record<string, string>) =>
    writeFileSync(file, Object.entries(u).map(([name, pw]) => `${name}:${hashSync(pw, { cost })}`).join('\n') + '\n');
  write(users);
  return { dir, file, write, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

type Raw = Record<string, unknown>;

/** A validated Config from plain objects, with the defaults a real file would get. */
export function testConfig(usersFile: string, overrides: Raw = {}): Config {
  const raw: Raw = {
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000 },
    store: { kind: 'memory' },
    users: { htpasswd: usersFile, watch: false },
    tokens: { signing: { alg: 'HS256', secret: SECRET } },
    upstreams: {},
    routes: [],
    log: { level: 'silent', access: false },
    ...overrides,
  };
  return validateConfig(raw, '', tmpdir());
}

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

export interface EchoUpstream {
  url: string;
  server: Server;
  received: Received[];
  /** Replace how it answers (default: 200 with a JSON echo). */
  handler: (req: IncomingMessage, res: ServerResponse, received: Received) => void;
  close(): Promise<void>;
}

/** An upstream that records what it received and echoes it back. */
export async function echoUpstream(): Promise<EchoUpstream> {
  const received: Received[] = [];
  const echo: EchoUpstream = {
    url: '',
    server: createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const r = { method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks).toString('utf8') };
        received.push(r);
        echo.handler(req, res, r);
      });
    }),
    received,
    handler: (_req, res, r) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(r));
    },
    close: () => new Promise((resolve) => {
      echo.server.closeAllConnections();
      echo.server.close(() => resolve());
    }),
  };
  await new Promise<void>((resolve) => echo.server.listen(0, '127.0.0.1', resolve));
  echo.url = `http://127.0.0.1:${(echo.server.address() as { port: number }).port}`;
  return echo;
}

/** The claims of a JWT (its middle part), read without checking anything: what a test inspects. */
export function jwtPayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

export function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`, 'utf8').toString('base64')}`;
}

export async function postJson(base: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

export interface RunningGateway {
  base: string;
  port: number;
  gateway: Gateway;
  close(): Promise<void>;
}

/** The real gateway on a free loopback port; `base` is https when the configuration has `server.tls`. */
export async function startGateway(config: Config, deps: GatewayDeps = {}): Promise<RunningGateway> {
  const gateway = createGateway(config, deps);
  const port = await gateway.listen(0, '127.0.0.1');
  const scheme = config.server.tls ? 'https' : 'http';
  return { base: `${scheme}://127.0.0.1:${port}`, port, gateway, close: () => gateway.close(500) };
}

/** Creates a token pair for user:password through the API. */
export async function createTokens(base: string, appKey: string, appSecret: string): Promise<{ accessToken: string; refreshToken: string; expiresInSeconds: number }> {
  const res = await postJson(base, '/v1/tokens/create', { appKey, appSecret });
  if (res.status !== 200) throw new Error(`create failed: ${res.status} ${await res.text()}`);
  return res.json() as Promise<{ accessToken: string; refreshToken: string; expiresInSeconds: number }>;
}

export interface GatewayFixtureOptions {
  /** htpasswd users (name → password); default alice:alice-pw. */
  users?: Record<string, string>;
  /** The users' bcrypt cost (default TEST_COST); a timing test wants a real one. */
  cost?: number;
  /** Start an echo upstream (default true); its URL is passed to `config`. */
  echo?: boolean;
  /** Start a redis-server of the suite's own (`true`, or its options); read it as `f.redis`. */
  redis?: boolean | RedisServerOptions;
  /** Start the gateway (default true); `false` for a suite that starts its own gateways from `f.users` and `f.redis`. */
  gateway?: boolean;
  /** Set up once for the file or block (`all`, the default) or afresh for every test (`each`). */
  scope?: 'all' | 'each';
  /** Runs before the gateway starts (an upstream of the suite's own, a tweak of the echo's handler). */
  before?: (f: GatewayFixture) => Promise<void> | void;
  /** The configuration overrides (see testConfig), given the fixture (users file, echo URL, Redis URL). */
  config?: (f: GatewayFixture) => Raw;
  /** Collect the gateway's log lines (JSON) at this level into `logs`. */
  log?: 'debug' | 'info' | 'warn';
  deps?: (f: GatewayFixture) => GatewayDeps;
  /** Runs after the gateway stopped (the suite's own upstreams). */
  after?: (f: GatewayFixture) => Promise<void> | void;
  /** The set-up's time limit (vitest's hook timeout otherwise). */
  setupTimeoutMs?: number;
}

/** What gatewayFixture sets up; members are filled in its beforeAll (or beforeEach). */
export interface GatewayFixture extends RunningGateway {
  users: Users;
  echo: EchoUpstream;
  /** The suite's own redis-server when `redis` was given. */
  redis: TestRedis;
  /** The gateway's log lines (raw JSON text) when `log` was given. */
  logs: string[];
}

/**
 * The one gateway set-up of the suites: an htpasswd file, an echo upstream, optionally a redis-server of
 * its own, and the real gateway on a free loopback port, set up before the tests (once, or before each
 * with `scope: 'each'`) and all of it stopped and removed after. Call it at the top level of a test file
 * (or of a describe block); read its members in the tests.
 */
export function gatewayFixture(options: GatewayFixtureOptions = {}): GatewayFixture {
  const f = { logs: [] as string[] } as unknown as GatewayFixture;
  const setUp = async () => {
    f.logs.length = 0;
    f.users = htpasswd(options.users ?? { alice: 'alice-pw' }, options.cost);
    if (options.redis) f.redis = await startRedis(options.redis === true ? {} : options.redis);
    if (options.echo !== false) f.echo = await echoUpstream();
    await options.before?.(f);
    if (options.gateway === false) return;
    const deps = options.deps?.(f) ?? {};
    if (options.log) deps.log = createLogger(options.log, (line) => f.logs.push(line));
    const running = await startGateway(testConfig(f.users.file, options.config?.(f) ?? {}), deps);
    Object.assign(f, running);
  };
  const tearDown = async () => {
    await f.gateway?.close(500);
    await f.echo?.close();
    await options.after?.(f);
    await f.redis?.destroy();
    f.users?.remove();
    // With scope 'each' the next set-up starts from nothing: a failed one must not close these twice.
    for (const key of ['gateway', 'echo', 'redis', 'users'] as const) delete (f as Partial<GatewayFixture>)[key];
  };
  if (options.scope === 'each') {
    beforeEach(setUp, options.setupTimeoutMs);
    afterEach(tearDown);
  } else {
    beforeAll(setUp, options.setupTimeoutMs);
    afterAll(tearDown);
  }
  return f;
}
