// What the scenarios share: the running processes, the parameters, the load helpers, the row shape.
import type { LoadOutput, LoadSpec } from './load.js';
import type { PacedOutput, PacedSpec } from './paced.js';
import { cpuMs, runJson } from './procs.js';
import type { GatewaySetup } from './gateway.js';
import { median, round, type LoadResult } from './stats.js';
import { runWrk, type Loader } from './wrk.js';

/** In the order they run: the throughput rows first (latency reuses the bearer maxima). */
export const SCENARIOS = ['framework', 'bearer', 'bearer-all-sources', 'basic', 'bearer-log', 'bearer-ratelimit', 'api-key', 'bearer-assertion', 'forward-auth', 'oidc', 'websocket', 'tls', 'h2', 'grpc', 'ldap-basic', 'latency', 'tokens', 'flood', 'soak', 'tracing'] as const;
export type ScenarioId = (typeof SCENARIOS)[number];

export interface Params {
  duration: number;
  connections: number;
  rounds: number;
  scenarios: ScenarioId[];
  soakRequests: number;
  profile: boolean;
  /** The load generator asked for; wrk falls back to autocannon when it cannot be had. */
  loader: 'wrk' | 'autocannon';
}

export interface Bench {
  params: Params;
  /** What drives the fixed-request throughput runs (wrk, or autocannon and why). */
  loader: Loader;
  floor: string;
  gateway: string;
  /** For the processes a scenario starts of its own (the Koa reference, gateway variants). */
  upstream: string;
  redisUrl: string;
  gatewaySetup: GatewaySetup;
  gatewayPid: number;
  /** For CPU accounting: the floor's, the upstream's and redis-server's process ids. */
  floorPid: number;
  upstreamPid: number;
  redisPid: number;
  /** `Bearer …` for the bench user; `Basic …` for the same user. */
  bearer: string;
  basic: string;
  password: string;
  createUsers: number;
  nextCreateUser: number;
  /** The floor's and the gateway's median maximum bearer rates (set by the bearer scenario, or measured by latency). */
  floorMax?: number;
  gatewayMax?: number;
  /** The Koa passthrough's median CPU per request (set by the framework scenario), to tell the chain's cost apart. */
  koaCpuUs?: number;
  /** Requests sent to the gateway so far by load children. */
  gatewayRequests: number;
  log(line: string): void;
}

/** One line of the table (and of results.json, with its raw rounds). */
export interface Row {
  id: string;
  scenario: string;
  rps: number | null;
  p50: number | null;
  p99: number | null;
  floorRps: number | null;
  ratio: number | null;
  /** CPU time (user + system) of the process under test per response, µs; the floor's in the same run; their ratio. */
  cpuUs: number | null;
  floorCpuUs: number | null;
  cpuRatio: number | null;
  /** Shown instead of the ratio when the comparison is not a quotient (latency, soak). */
  ratioText?: string;
  target: string;
  met: boolean | null;
  notes: string[];
  details: Record<string, unknown>;
}

/** A process that takes load apart from the floor and the gateway: the Koa reference, a gateway variant. */
export interface Proc {
  name: string;
  origin: string;
  pid: number;
}

/** 'floor' and 'gateway' are the run's own; any other process under test is passed as a Proc. */
export type Target = 'floor' | 'gateway' | Proc;

export function resolve(b: Bench, target: Target): { origin: string; pid: number } {
  if (target === 'floor') return { origin: b.floor, pid: b.floorPid };
  if (target === 'gateway') return { origin: b.gateway, pid: b.gatewayPid };
  return target;
}

/** CPU time (user + system) per response during a run, in µs: the proxy (floor or gateway), upstream, redis. */
export interface CpuPerRequest {
  proxyUs: number;
  upstreamUs: number;
  redisUs: number;
}

export type LoadRequest = Omit<LoadSpec, 'origin' | 'connections'> & {
  connections?: number;
  /** autocannon even when wrk is there (the token scenarios keep one generator for all their rows). */
  autocannon?: boolean;
};

/**
 * One closed-loop run against a process: wrk for a fixed request for a duration, autocannon (in a
 * child process) for per-connection state (refresh, create), a request count (the soak), or when wrk
 * is not available. The result says which one ran.
 */
export async function load(b: Bench, target: Target, request: LoadRequest): Promise<LoadOutput & { cpu: CpuPerRequest; loader: 'wrk' | 'autocannon' }> {
  const { autocannon, ...spec } = request;
  const full: LoadSpec = { connections: b.params.connections, duration: b.params.duration, ...spec, origin: resolve(b, target).origin };
  const wrk = b.loader.kind === 'wrk' && !autocannon && !full.amount && (full.mode ?? 'fixed') === 'fixed';
  const out = await measured(b, target, () => (wrk ? runWrk(full) : runJson<LoadOutput>('load', full)));
  return { ...out, loader: wrk ? 'wrk' : 'autocannon' };
}

/** One open-loop fixed-rate run (in a child process). */
export async function paced(b: Bench, target: Target, spec: Omit<PacedSpec, 'origin'>): Promise<PacedOutput & { cpu: CpuPerRequest }> {
  return measured(b, target, () => runJson<PacedOutput>('paced', { ...spec, origin: resolve(b, target).origin }));
}

/** Runs a load child and adds what the server-side processes spent on it (robust to other load on the machine). */
export async function measured<T extends LoadResult>(b: Bench, target: Target, run: () => Promise<T>): Promise<T & { cpu: CpuPerRequest }> {
  const pids = [resolve(b, target).pid, b.upstreamPid, b.redisPid];
  const before = await Promise.all(pids.map(cpuMs));
  const result = await run();
  const after = await Promise.all(pids.map(cpuMs));
  if (target === 'gateway') b.gatewayRequests += result.total;
  const per = (i: number) => round(((after[i]! - before[i]!) * 1000) / Math.max(1, result.total), 0);
  return { ...result, cpu: { proxyUs: per(0), upstreamUs: per(1), redisUs: per(2) } };
}

/** Runs a and b in round r, in alternating order (ABBA…), so drift hits both sides alike. */
export async function pair<A, B>(r: number, a: () => Promise<A>, b: () => Promise<B>): Promise<[A, B]> {
  if (r % 2 === 0) {
    const x = await a();
    return [x, await b()];
  }
  const y = await b();
  return [await a(), y];
}

/** Problems with a run that should have answered 2xx only. */
export function problems(label: string, r: LoadResult): string[] {
  const bad = Object.entries(r.statusCodes).filter(([code]) => !code.startsWith('2'));
  const out: string[] = [];
  if (bad.length > 0) out.push(`${label}: non-2xx answers ${bad.map(([c, n]) => `${c}×${n}`).join(', ')}`);
  if (r.errors > 0) out.push(`${label}: ${r.errors} connection errors/timeouts`);
  return out;
}

export const med = (values: number[], digits = 2) => round(median(values), digits);

export function fmtLatency(r: LoadResult & { cpu?: CpuPerRequest }): string {
  const cpu = r.cpu ? `, CPU/req ${r.cpu.proxyUs} µs (+ redis ${r.cpu.redisUs} µs)` : '';
  return `${Math.round(r.rps)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms${cpu}`;
}
