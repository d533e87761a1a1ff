// h2load (Debian package nghttp2-client, C) drives the HTTP/2 rows: a fixed request for a duration over
// a few connections with several streams each, as wrk drives the HTTP/1.1 ones.
import { execFile } from 'node:child_process';
import type { LoadOutput } from './load.js';
import { spawnTracked } from './procs.js';

/** `h2load --version`'s line, or undefined when h2load is not on PATH. */
export function h2loadVersion(): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('h2load', ['--version'], { timeout: 5000 }, (err, stdout) => {
      const line = String(stdout ?? '').split('\n').find((l) => l.startsWith('h2load'));
      resolve(err && !line ? undefined : line?.trim());
    });
  });
}

export interface H2loadSpec {
  /** https://127.0.0.1:PORT/path */
  url: string;
  connections: number;
  /** Streams in flight per connection (-m). */
  streams: number;
  duration: number;
  headers: Record<string, string>;
  /** A file whose bytes each request sends as its body (h2load -d: a POST). */
  dataFile?: string;
}

/**
 * One h2load run; its summary as a LoadOutput. h2load reports the mean, min and max time per request,
 * no percentiles: p50 and p99 are NaN and `mean` holds the mean.
 */
export function runH2load(spec: H2loadSpec): Promise<LoadOutput> {
  if (!/^https?:\/\/127\.0\.0\.1:/.test(spec.url)) throw new Error(`refusing to load ${spec.url}: 127.0.0.1 only`);
  const headers = Object.entries(spec.headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  const data = spec.dataFile ? ['-d', spec.dataFile] : [];
  const args = ['-t1', `-c${spec.connections}`, `-m${spec.streams}`, '-D', String(spec.duration), ...headers, ...data, spec.url];
  const child = spawnTracked('h2load', args);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const guard = setTimeout(() => child.kill('SIGKILL'), (spec.duration + 30) * 1000);
  return new Promise((resolve, reject) => {
    child.once('error', (e) => {
      clearTimeout(guard);
      reject(e);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(guard);
      const parsed = code === 0 ? parseH2load(out) : undefined;
      if (!parsed) reject(new Error(`h2load failed (${code ?? signal}): ${out.trim().split('\n').slice(-5).join(' / ')}`));
      else resolve(parsed);
    });
  });
}

/** Reads h2load's summary: `finished in 3.00s, …`, `requests: N total, … S succeeded, F failed, E errored, T timeout`, `status codes: …`, `time for request: min max mean sd`. */
function parseH2load(text: string): LoadOutput | undefined {
  const finished = /finished in ([\d.]+)(ms|s)/.exec(text);
  const requests = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(text);
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(text);
  const time = /time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)/.exec(text);
  if (!finished || !requests || !codes) return undefined;
  const ms = (v: string, unit: string) => Number(v) * (unit === 'us' ? 0.001 : unit === 's' ? 1000 : 1);
  const durationS = ms(finished[1]!, finished[2]!) / 1000;
  const done = Number(requests[3]);
  const [ok2, ok3, c4, c5] = [1, 2, 3, 4].map((i) => Number(codes[i]));
  const statusCodes: Record<string, number> = {};
  if (ok2! > 0) statusCodes['2xx'] = ok2!;
  if (ok3! > 0) statusCodes['3xx'] = ok3!;
  if (c4! > 0) statusCodes['4xx'] = c4!;
  if (c5! > 0) statusCodes['5xx'] = c5!;
  const ok = ok2! + ok3!;
  return {
    total: done,
    ok,
    durationS,
    rps: ok / Math.max(durationS, 1e-9),
    p50: Number.NaN,
    p90: Number.NaN,
    p99: Number.NaN,
    max: time ? ms(time[3]!, time[4]!) : Number.NaN,
    mean: time ? ms(time[5]!, time[6]!) : Number.NaN,
    non2xx: c4! + c5!,
    errors: Number(requests[5]) + Number(requests[6]),
    timeouts: Number(requests[7]),
    statusCodes,
  };
}
