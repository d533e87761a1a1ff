// Processes other than the main gateway, each started for its own scenario, measured against the
// floor in the same run, and stopped: the Koa reference (what the framework costs), the gateway with
// the access log on or a rate limit on (what each feature costs on top of the default config), and the
// gateway with every other bearer source configured (API keys and an OpenID issuer): its own Bearer
// token beside the main gateway's row, and an API key.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Bench, Proc, Row } from './context.js';
import { call, createTokens, LIST_PATH, startGateway, USER, writeVariantFiles, type GatewayVariant } from './gateway.js';
import { miniProvider } from './mini-provider.js';
import { rssMb, startService, stopChild } from './procs.js';
import { againstFloor, warmUp, type Goal } from './throughput.js';

/** Issue 12's goals for the gateway with one feature on. */
const ACCESS_LOG_GOAL: Goal = { ratio: 0.8 };
const RATE_LIMIT_GOAL: Goal = { ratio: 0.75 };
/** Far above any rate one machine reaches in a minute: every request pays the Redis round trip, none is refused. */
const NEVER_REACHED = { requests: 10_000_000, windowSeconds: 60 };

export async function frameworkScenario(b: Bench): Promise<Row> {
  const koa = await startService('koa-floor', [b.upstream]);
  try {
    const proc: Proc = { name: 'koa', origin: `http://127.0.0.1:${koa.port}`, pid: koa.child.pid! };
    await warmUp(b, proc, b.bearer);
    const row = await againstFloor(b, 'framework', 'Koa + http-proxy passthrough, one middleware, no auth (reference: what the framework costs)', proc, b.bearer, null);
    b.koaCpuUs = row.cpuUs!;
    return row;
  } finally {
    await stopChild(koa.child);
  }
}

export async function accessLogScenario(b: Bench): Promise<Row> {
  const variant: GatewayVariant = { name: 'access-log', accessLog: true };
  return gatewayVariant(b, variant, 'bearer-log', 'Bearer GET /v1/conversations, access log on (JSON lines to a file)', ACCESS_LOG_GOAL, (row, logFile) => {
    const log = readFileSync(logFile);
    let lines = 0;
    for (let i = log.indexOf(10); i >= 0; i = log.indexOf(10, i + 1)) lines++;
    row.notes.unshift(`access log: stdout redirected to a file, as an operator runs it; ${lines} lines (warm-up included), ${Math.round(log.length / Math.max(1, lines))} B a line`);
  });
}

export async function rateLimitScenario(b: Bench): Promise<Row> {
  const variant: GatewayVariant = { name: 'rate-limit', rateLimit: NEVER_REACHED };
  return gatewayVariant(b, variant, 'bearer-ratelimit', 'Bearer GET /v1/conversations, rate limit on (one Redis round trip)', RATE_LIMIT_GOAL, (row) => {
    row.notes.unshift(`rateLimit ${NEVER_REACHED.requests} requests / ${NEVER_REACHED.windowSeconds} s: each request is counted in Redis, none refused`);
  });
}

/** Issue 41: an API key, with API keys and an OpenID issuer configured: ≥ 0.80 × the floor's throughput, CPU ≤ 1.25 ×. */
const API_KEY_GOAL: Goal = { ratio: 0.8, cpuRatio: 1.25 };
/** Issue 41: enabling a source must not tax the others: the gateway's own Bearer token keeps Bearer's line with every source on. */
const ALL_SOURCES_BEARER_GOAL: Goal = { ratio: 0.85, cpuRatio: 1.25 };

/**
 * The gateway's own Bearer token against a gateway with API keys and an OpenID issuer configured too
 * (`bearer-all-sources`, beside the main gateway's `bearer` row, which has neither): what the other
 * sources being on costs a request that is none of theirs.
 */
export async function bearerAllSourcesScenario(b: Bench): Promise<Row> {
  const provider = await miniProvider();
  try {
    const variant: GatewayVariant = { name: 'all-sources', apiKeys: true, issuer: provider.issuer };
    return await gatewayVariant(b, variant, 'bearer-all-sources', 'Bearer GET /v1/conversations with API keys and an OpenID issuer also configured, access log off', ALL_SOURCES_BEARER_GOAL, (row) => {
      row.notes.unshift('the gateway\'s own access token; apiKeys: {} and one identity.issuers entry (RS256, keys fetched at start) configured beside it: compare with the bearer row, which has neither');
    });
  } finally {
    await provider.close();
  }
}

export async function apiKeyScenario(b: Bench): Promise<Row> {
  const provider = await miniProvider();
  try {
    return await apiKeyRow(b, provider.issuer);
  } finally {
    await provider.close();
  }
}

/** The api-key row on a gateway with API keys and the bench provider's issuer configured. */
async function apiKeyRow(b: Bench, issuer: string): Promise<Row> {
  const setup = writeVariantFiles(b.gatewaySetup, { name: 'api-key', apiKeys: true, issuer });
  const gw = await startGateway(setup, b.redisUrl);
  try {
    // Made with the CLI, as an operator does; the key is printed alone on stdout.
    const main = fileURLToPath(new URL('../src/main.js', import.meta.url));
    const key = execFileSync(process.execPath, [main, 'keys', 'create', '--name', 'bench', '--config', setup.configFile], {
      env: { ...process.env, REDIS_URL: b.redisUrl }, stdio: ['ignore', 'pipe', 'ignore'],
    }).toString().trim();
    const header = `Bearer ${key}`;
    const check = await call(gw.origin, 'GET', LIST_PATH, { authorization: header });
    if (check.status !== 200) throw new Error(`api-key: the gateway answered ${check.status} to the key; see ${setup.logFile}`);
    const proc: Proc = { name: 'api-key', origin: gw.origin, pid: gw.child.pid! };
    await warmUp(b, proc, header);
    const row = await againstFloor(b, 'api-key', 'API key (Authorization: Bearer agk_…) GET /v1/conversations, an OpenID issuer also configured, access log off', proc, header, API_KEY_GOAL);
    row.notes.unshift('the key is verified from memory after its first use (SHA-256 of the secret, kept true by the store\'s change channel); one identity.issuers entry configured beside it');
    row.notes.push(`RSS of this gateway process after its rounds: ${(await rssMb(proc.pid)).toFixed(1)} MB`);
    return row;
  } finally {
    await stopChild(gw.child, 10_000);
  }
}

/** A gateway process of its own config; its own token too, since every gateway process signs with its own key. */
async function gatewayVariant(b: Bench, variant: GatewayVariant, id: string, scenario: string, goal: Goal, annotate: (row: Row, logFile: string) => void): Promise<Row> {
  const setup = writeVariantFiles(b.gatewaySetup, variant);
  const gw = await startGateway(setup, b.redisUrl);
  try {
    const { accessToken } = await createTokens(gw.origin, USER, b.password);
    const bearer = `Bearer ${accessToken}`;
    const check = await call(gw.origin, 'GET', LIST_PATH, { authorization: bearer });
    const limited = check.headers['ratelimit-limit'] !== undefined;
    if (check.status !== 200 || limited !== Boolean(variant.rateLimit)) {
      throw new Error(`${id}: the variant gateway answered ${check.status}${limited ? ' with' : ' without'} RateLimit headers; see ${setup.logFile}`);
    }
    const proc: Proc = { name: id, origin: gw.origin, pid: gw.child.pid! };
    await warmUp(b, proc, bearer);
    const row = await againstFloor(b, id, scenario, proc, bearer, goal);
    annotate(row, setup.logFile);
    row.notes.push(`RSS of this gateway process after its rounds: ${(await rssMb(proc.pid)).toFixed(1)} MB`);
    return row;
  } finally {
    await stopChild(gw.child, 10_000);
  }
}
