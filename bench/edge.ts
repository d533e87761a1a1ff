// The edge rows: the gateway's TLS listener over HTTP/1.1 (wrk) and HTTP/2 (h2load), each against a TLS
// floor (the bare http-proxy passthrough behind node:https, or node:http2's compatibility API) in the
// same run, and a Basic request of a directory user (a real slapd of the bench's own), cached after its
// first bind, against the plain floor. A row whose tool is missing (openssl, h2load, slapd) is skipped
// with a note saying what to install.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { load, measured, med, pair, problems, type Bench, type Proc, type Row } from './context.js';
import { basicHeader, call, createTokens, LIST_PATH, startGateway, USER, writeVariantFiles, type GatewayVariant } from './gateway.js';
import { h2loadVersion, runH2load } from './h2load.js';
import { miniProvider } from './mini-provider.js';
import { newestProfile, profileTable, summarizeProfile } from './profile.js';
import { startService, stopChild } from './procs.js';
import type { LoadResult } from './stats.js';
import { againstFloor, goalText, meets, warmUp, type Goal } from './throughput.js';
import { startSlapd } from '../test/support/slapd.js';

/** Where the issue asks for it: Basic from the directory, cached, as Basic from the htpasswd file. */
const LDAP_GOAL: Goal = { ratio: 0.85 };
/** Issue 41: Bearer over TLS against the TLS floor, with API keys and an OpenID issuer configured. */
const TLS_GOAL: Goal = { ratio: 0.8, cpuRatio: 1.25 };
/** HTTP/2 streams in flight per connection; with H2_CONNECTIONS, as many requests in flight as wrk's 32 connections. */
const H2_STREAMS = 8;

const SLAPD = '/usr/sbin/slapd';
const LDAP_USER = 'bench-ldap';

/** A row that did not run, and why. */
export function skipped(id: string, scenario: string, why: string): Row {
  return {
    id, scenario: `${scenario} — skipped: ${why}`, rps: null, p50: null, p99: null, floorRps: null, ratio: null,
    cpuUs: null, floorCpuUs: null, cpuRatio: null, target: '(reference)', met: null, notes: [`skipped: ${why}`], details: { skipped: why },
  };
}

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** A self-signed P-256 certificate for 127.0.0.1, the same for the gateway and the TLS floors. */
function certificate(dir: string): { certFile: string; keyFile: string } {
  const certFile = join(dir, 'tls.pem');
  const keyFile = join(dir, 'tls.key');
  if (!existsSync(certFile)) {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', keyFile, '-out', certFile], { stdio: 'ignore' });
  }
  return { certFile, keyFile };
}

/** A gateway variant (its own YAML and process), its Bearer token, and a check that it answers. */
export async function startVariant(b: Bench, variant: GatewayVariant): Promise<{ proc: Proc; stop: () => Promise<void>; bearer: string }> {
  const setup = writeVariantFiles(b.gatewaySetup, variant);
  // With --profile, a variant gateway is profiled too; its top functions are logged when it stops.
  const profileDir = b.params.profile ? join(b.gatewaySetup.dir, 'profiles', variant.name) : undefined;
  const started = Date.now();
  const gw = await startGateway(setup, b.redisUrl, profileDir);
  const stop = async () => {
    await stopChild(gw.child, 10_000);
    const file = profileDir && newestProfile(profileDir, started);
    if (file) b.log(`${variant.name}: ${profileTable(summarizeProfile(file))}`);
  };
  try {
    const { accessToken } = await createTokens(gw.origin, USER, b.password);
    const bearer = `Bearer ${accessToken}`;
    const check = await call(gw.origin, 'GET', LIST_PATH, { authorization: bearer });
    if (check.status !== 200) throw new Error(`${variant.name}: the variant gateway answered ${check.status}; see ${setup.logFile}`);
    return { proc: { name: variant.name, origin: gw.origin, pid: gw.child.pid! }, stop, bearer };
  } catch (err) {
    await stopChild(gw.child, 10_000);
    throw err;
  }
}

interface Side {
  result: LoadResult;
  cpuUs: number;
  upstreamUs: number;
}

/**
 * Rounds of the TLS floor and the gateway alternating (ABBA), each driven by `drive`; the row's columns as
 * againstFloor's, with the TLS floor as the floor; judged against `goal` when one is given (null: a reference row).
 */
export async function againstTlsFloor(
  b: Bench, id: string, scenario: string, floor: Proc, gateway: Proc, drive: (p: Proc, duration: number) => Promise<LoadResult>, loader: string,
  floorText = `the TLS floor (${floor.name}: the same http-proxy passthrough behind the same certificate)`, goal: Goal | null = null,
): Promise<Row> {
  const run = async (p: Proc, duration = b.params.duration): Promise<Side> => {
    const r = await measured(b, p, () => drive(p, duration));
    return { result: r, cpuUs: r.cpu.proxyUs, upstreamUs: r.cpu.upstreamUs };
  };
  // Warm-up, not recorded: the JIT, the TLS sessions' first handshakes, the upstream pools.
  const warm = Math.min(2, b.params.duration);
  await run(floor, warm);
  await run(gateway, warm);
  const rounds: { floor: Side; proxy: Side; ratio: number; cpuRatio: number }[] = [];
  const failures: string[] = [];
  for (let r = 0; r < b.params.rounds; r++) {
    const [f, g] = await pair(r, () => run(floor), () => run(gateway));
    failures.push(...problems(`round ${r + 1} TLS floor`, f.result), ...problems(`round ${r + 1} ${id}`, g.result));
    const round = { floor: f, proxy: g, ratio: g.result.rps / f.result.rps, cpuRatio: g.cpuUs / f.cpuUs };
    rounds.push(round);
    b.log(`  ${id} round ${r + 1}: ${floor.name} ${describe(f)} | gateway ${describe(g)} | ratio ${round.ratio.toFixed(3)}, CPU ratio ${round.cpuRatio.toFixed(2)}`);
  }
  const p = (side: 'floor' | 'proxy', key: 'p50' | 'p99') => {
    const values = rounds.map((x) => x[side].result[key]).filter((v) => !Number.isNaN(v));
    return values.length ? med(values) : null;
  };
  const mean = (side: 'floor' | 'proxy') => med(rounds.map((x) => x[side].result.mean ?? Number.NaN));
  const ratio = med(rounds.map((x) => x.ratio), 3);
  const cpuRatio = med(rounds.map((x) => x.cpuRatio), 2);
  return {
    id, scenario,
    rps: med(rounds.map((x) => x.proxy.result.rps), 0),
    p50: p('proxy', 'p50'),
    p99: p('proxy', 'p99'),
    floorRps: med(rounds.map((x) => x.floor.result.rps), 0),
    ratio,
    cpuUs: med(rounds.map((x) => x.proxy.cpuUs), 0),
    floorCpuUs: med(rounds.map((x) => x.floor.cpuUs), 0),
    cpuRatio,
    target: goalText(goal),
    met: goal === null ? null : failures.length === 0 && meets(goal, ratio, cpuRatio),
    notes: [
      `the floor here is ${floorText}; load by ${loader}; ` +
        `mean latency gateway ${mean('proxy')} ms, floor ${mean('floor')} ms; CPU per request of the upstream ${med(rounds.map((x) => x.floor.upstreamUs), 0)} µs`,
      ...failures,
    ],
    details: { rounds: rounds.map((x) => ({ floor: x.floor, proxy: x.proxy, ratio: x.ratio, cpuRatio: x.cpuRatio })) },
  };
}

function describe(s: Side): string {
  const r = s.result;
  const latency = Number.isNaN(r.p50) ? `mean ${r.mean?.toFixed(2) ?? '?'} ms` : `p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms`;
  return `${Math.round(r.rps)} req/s, ${latency}, CPU/req ${s.cpuUs} µs`;
}

/**
 * HTTP/1.1 over TLS: wrk (https, keep-alive) against the gateway's TLS listener and against node:https +
 * http-proxy. The gateway has API keys and an OpenID issuer configured beside its own tokens (issue 41's
 * line: CPU ≤ 1.25 × and ≥ 0.80 × the TLS floor's throughput, measured with every bearer source on).
 */
export async function tlsScenario(b: Bench): Promise<Row> {
  const scenario = 'Bearer GET /v1/conversations over TLS, HTTP/1.1, API keys and an OpenID issuer also configured (vs the TLS floor: node:https + http-proxy)';
  if (!hasOpenssl()) return skipped('tls', scenario, 'openssl is not on PATH (it makes the certificate)');
  if (b.loader.kind !== 'wrk') return skipped('tls', scenario, `wrk is not available (${b.loader.fallback ?? '?'})`);
  const tls = certificate(b.gatewaySetup.dir);
  const floor = await startService('tls-floor', [b.upstream, tls.certFile, tls.keyFile, 'h1']);
  const provider = await miniProvider();
  let gateway: Awaited<ReturnType<typeof startVariant>> | undefined;
  try {
    gateway = await startVariant(b, { name: 'tls', tls, apiKeys: true, issuer: provider.issuer });
    const floorProc: Proc = { name: 'https floor', origin: `https://127.0.0.1:${floor.port}`, pid: floor.child.pid! };
    const headers = { authorization: gateway.bearer };
    // A judged row: the TLS floor (a process of its own, started cold) and the gateway each warmed until
    // their CPU per request settles, as the floor and the gateway of every judged row of againstFloor.
    await warmUp(b, floorProc, gateway.bearer);
    await warmUp(b, gateway.proc, gateway.bearer);
    return await againstTlsFloor(b, 'tls', scenario, floorProc, gateway.proc, (p, duration) => load(b, p, { path: LIST_PATH, headers, duration }), 'wrk (https, one TLS handshake per connection, then keep-alive)', undefined, TLS_GOAL);
  } finally {
    await gateway?.stop();
    await provider.close();
    await stopChild(floor.child);
  }
}



/** HTTP/2: h2load against the gateway's TLS listener (h2) and against node:http2's compatibility API + http-proxy. */
export async function h2Scenario(b: Bench): Promise<Row> {
  const connections = Math.max(1, Math.round(b.params.connections / H2_STREAMS));
  const scenario = `Bearer GET /v1/conversations over HTTP/2, ${connections} connections × ${H2_STREAMS} streams (vs the h2 floor: node:http2 + http-proxy)`;
  if (!hasOpenssl()) return skipped('h2', scenario, 'openssl is not on PATH (it makes the certificate)');
  const version = await h2loadVersion();
  if (!version) return skipped('h2', scenario, 'h2load is not on PATH (apt-get install nghttp2-client)');
  const tls = certificate(b.gatewaySetup.dir);
  const floor = await startService('tls-floor', [b.upstream, tls.certFile, tls.keyFile, 'h2']);
  let gateway: Awaited<ReturnType<typeof startVariant>> | undefined;
  try {
    gateway = await startVariant(b, { name: 'h2', tls });
    const floorProc: Proc = { name: 'h2 floor', origin: `https://127.0.0.1:${floor.port}`, pid: floor.child.pid! };
    const headers = { authorization: gateway.bearer };
    const drive = (p: Proc, duration: number) => runH2load({ url: p.origin + LIST_PATH, connections, streams: H2_STREAMS, duration, headers });
    const row = await againstTlsFloor(b, 'h2', scenario, floorProc, gateway.proc, drive, `${version} -t1 -c${connections} -m${H2_STREAMS} -D${b.params.duration} (no percentiles: p50/p99 not measured)`);
    return row;
  } finally {
    await gateway?.stop();
    await stopChild(floor.child);
  }
}

/**
 * Basic with a directory user (a real slapd, direct bind), access log off, vs the plain floor: the first
 * request binds (timed separately), the rest are answered from the verified-bind cache.
 */
export async function ldapBasicScenario(b: Bench): Promise<Row> {
  const scenario = 'Basic GET /v1/conversations, user from LDAP (slapd, direct bind; cached after the first), access log off';
  if (!existsSync(SLAPD)) return skipped('ldap-basic', scenario, `${SLAPD} is missing (apt-get install slapd ldap-utils)`);
  const password = `${b.password}-ldap`;
  const slapd = await startSlapd([{ uid: LDAP_USER, password }]);
  let gateway: Awaited<ReturnType<typeof startVariant>> | undefined;
  try {
    gateway = await startVariant(b, { name: 'ldap', ldap: { url: slapd.url, userDn: `uid={user},ou=people,${slapd.baseDn}` } });
    const basic = basicHeader(LDAP_USER, password);
    const first = await call(gateway.proc.origin, 'GET', LIST_PATH, { authorization: basic });
    const second = await call(gateway.proc.origin, 'GET', LIST_PATH, { authorization: basic });
    if (first.status !== 200 || second.status !== 200) throw new Error(`ldap-basic: the directory user was answered ${first.status}, then ${second.status}`);
    await warmUp(b, gateway.proc, basic);
    const row = await againstFloor(b, 'ldap-basic', scenario, gateway.proc, basic, LDAP_GOAL);
    row.notes.unshift(`first Basic request ${first.status} in ${first.ms.toFixed(1)} ms (a bind to slapd), the next ${second.status} in ${second.ms.toFixed(1)} ms (cached; new connection each)`);
    return row;
  } finally {
    await gateway?.stop();
    await slapd.destroy();
  }
}
