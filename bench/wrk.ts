// wrk (C, one thread) as the load generator for fixed-request throughput runs: autocannon is a Node
// process that needs about as much CPU per request as the proxy it measures, and on a small machine it
// takes the cores the gateway/floor ratio is about. Installed with apt-get where missing (as root).
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LoadOutput, LoadSpec } from './load.js';
import { spawnTracked } from './procs.js';

/** Which load generator the fixed-request runs use, and why when it is not wrk. */
export interface Loader {
  kind: 'wrk' | 'autocannon';
  /** `wrk -v`'s first line, when wrk is used. */
  version?: string;
  /** Why autocannon is used instead of wrk (also printed and written to results.json). */
  fallback?: string;
  /** Whether this run installed wrk. */
  installed?: boolean;
}

/** The script's source in the repository (tsc does not copy .lua files to dist/). */
const SCRIPT = fileURLToPath(new URL('../../bench/wrk-report.lua', import.meta.url));

function run(command: string, args: string[], timeoutMs: number, env?: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { timeout: timeoutMs, env: env ?? process.env, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

/** `wrk -v` exits 1 after printing the version: the version line is what tells it is there. */
async function wrkVersion(): Promise<string | undefined> {
  const { out } = await run('wrk', ['-v'], 5000);
  const line = out.split('\n').find((l) => l.startsWith('wrk '));
  return line?.replace(/\s+Copyright.*$/, '').trim();
}

/** wrk when it is on PATH or can be installed (root, apt-get); autocannon with the reason otherwise. */
export async function ensureWrk(log: (line: string) => void, forceAutocannon = false): Promise<Loader> {
  if (forceAutocannon) return { kind: 'autocannon', fallback: '--loader autocannon was given' };
  const present = await wrkVersion();
  if (present) return { kind: 'wrk', version: present };
  if (process.getuid?.() !== 0) return { kind: 'autocannon', fallback: 'wrk is not on PATH and the bench is not root (apt-get install wrk)' };
  log('bench: wrk is not on PATH; apt-get update && apt-get install -y wrk …');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Waits for the dpkg lock a while (someone else may be installing) rather than failing at once.
  const lock = ['-o', 'DPkg::Lock::Timeout=60'];
  const update = await run('apt-get', [...lock, 'update'], 180_000, env);
  const install = update.code === 0 ? await run('apt-get', [...lock, 'install', '-y', 'wrk'], 300_000, env) : update;
  const version = await wrkVersion();
  if (version) return { kind: 'wrk', version, installed: true };
  const tail = install.out.trim().split('\n').slice(-2).join(' / ');
  const step = update.code !== 0 ? 'apt-get update failed' : install.code !== 0 ? 'apt-get install -y wrk failed' : 'apt-get install -y wrk left no wrk on PATH';
  return { kind: 'autocannon', fallback: `${step} (exit ${install.code}: ${tail})` };
}

/** The JSON line wrk-report.lua prints from done(). */
interface WrkReport {
  requests: number;
  durationUs: number;
  bytes: number;
  connect: number;
  read: number;
  write: number;
  timeout: number;
  status: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
  maxUs: number;
  meanUs: number;
}

/** One `wrk -t1` run of a fixed request for spec.duration seconds, as a LoadResult. */
export function runWrk(spec: LoadSpec): Promise<LoadOutput> {
  if (!/^https?:\/\/127\.0\.0\.1:/.test(spec.origin)) throw new Error(`refusing to load ${spec.origin}: 127.0.0.1 only`);
  const duration = spec.duration ?? 10;
  const headers = Object.entries(spec.headers ?? {}).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  const args = ['-t1', `-c${spec.connections}`, `-d${duration}s`, '--timeout', '10s', '-s', SCRIPT, ...headers, spec.origin + spec.path];
  const env: NodeJS.ProcessEnv = { ...process.env, BENCH_METHOD: spec.method ?? 'GET' };
  if (spec.body !== undefined) env.BENCH_BODY = spec.body;
  const child = spawnTracked('wrk', args, { env });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  // wrk stops itself after -d; this only guards against a wrk that hangs.
  const guard = setTimeout(() => child.kill('SIGKILL'), (duration + 30) * 1000);
  return new Promise((resolve, reject) => {
    child.once('error', (e) => {
      clearTimeout(guard);
      reject(e);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(guard);
      const last = out.trim().split('\n').pop() ?? '';
      if (code !== 0 || !last.startsWith('{')) {
        reject(new Error(`wrk failed (${code ?? signal}): ${(err || out).trim()}`));
        return;
      }
      resolve(toLoadOutput(JSON.parse(last) as WrkReport));
    });
  });
}

function toLoadOutput(w: WrkReport): LoadOutput {
  const ok = w.requests - w.status;
  const durationS = w.durationUs / 1e6;
  // wrk tells answers above 399 from the rest, nothing finer: the status code keys say exactly that.
  const statusCodes: Record<string, number> = {};
  if (ok > 0) statusCodes['2xx/3xx'] = ok;
  if (w.status > 0) statusCodes['≥400'] = w.status;
  return {
    total: w.requests,
    ok,
    durationS,
    rps: ok / durationS,
    p50: w.p50Us / 1000,
    p90: w.p90Us / 1000,
    p99: w.p99Us / 1000,
    max: w.maxUs / 1000,
    mean: w.meanUs / 1000,
    non2xx: w.status,
    errors: w.connect + w.read + w.write,
    timeouts: w.timeout,
    statusCodes,
  };
}
