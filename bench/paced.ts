// An open-loop, fixed-rate load child: request n is sent at start + n/rate whatever the answers do
// (autocannon's rate limit lets each connection burst its per-second quota at the top of each second,
// which measures bursts, not a fixed rate). Latency is measured from the moment a request is handed to
// the agent, so time spent waiting for a free connection counts. SIGTERM stops early and still reports.
// Usage: node paced.js '<PacedSpec JSON>'; prints one JSON line (LoadResult + sent, rate).
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Samples, type LoadResult } from './stats.js';

export interface PacedSpec {
  origin: string;
  path: string;
  headers?: Record<string, string>;
  /** Requests per second. */
  rate: number;
  duration: number;
  /** Most connections open at once; beyond that requests wait in the agent (and that wait counts). */
  connections: number;
  /** basic-wrong: `Authorization: Basic` with a new, unknown user name and a wrong password each time. */
  mode?: 'fixed' | 'basic-wrong';
}

export interface PacedOutput extends LoadResult {
  sent: number;
  targetRate: number;
}

function main(): void {
  const spec = JSON.parse(process.argv[2] ?? '') as PacedSpec;
  const url = new URL(spec.origin);
  if (url.hostname !== '127.0.0.1') throw new Error(`refusing to load ${spec.origin}: 127.0.0.1 only`);
  const agent = new Agent({ keepAlive: true, maxSockets: spec.connections });
  const samples = new Samples();
  const statusCodes: Record<string, number> = {};
  const total = Math.round(spec.rate * spec.duration);
  const interval = 1000 / spec.rate;
  let sent = 0;
  let inFlight = 0;
  let errors = 0;
  let stopped = false;
  const start = performance.now();

  const headersFor = (n: number): Record<string, string> => {
    if (spec.mode !== 'basic-wrong') return spec.headers ?? {};
    const credentials = Buffer.from(`flood-${process.pid}-${n}:not-the-password`).toString('base64');
    return { ...spec.headers, authorization: `Basic ${credentials}` };
  };

  const fire = (n: number) => {
    inFlight++;
    const sentAt = performance.now();
    const req = request({ host: url.hostname, port: url.port, path: spec.path, agent, headers: headersFor(n) }, (res) => {
      res.resume();
      res.once('end', () => {
        samples.push(performance.now() - sentAt);
        statusCodes[res.statusCode ?? 0] = (statusCodes[res.statusCode ?? 0] ?? 0) + 1;
        done();
      });
    });
    req.once('error', () => {
      errors++;
      done();
    });
    req.end();
  };
  const done = () => {
    inFlight--;
    if ((stopped || sent >= total) && inFlight === 0) finish();
  };

  const tick = () => {
    const now = performance.now();
    while (!stopped && sent < total && start + sent * interval <= now) fire(sent++);
    if (!stopped && sent < total) setTimeout(tick, 1);
    else if (inFlight === 0) finish();
  };

  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    const durationS = (performance.now() - start) / 1000;
    let ok = 0;
    for (const [code, count] of Object.entries(statusCodes)) if (code.startsWith('2')) ok += count;
    const out: PacedOutput = {
      total: samples.count, ok, durationS, rps: ok / durationS, ...samples.percentiles(),
      non2xx: samples.count - ok, errors, timeouts: 0, statusCodes, sent, targetRate: spec.rate,
    };
    process.stdout.write(`${JSON.stringify(out)}\n`);
    process.exit(0);
  };

  process.once('SIGTERM', () => {
    stopped = true;
    // Whatever is still queued or in flight after a grace period is abandoned.
    setTimeout(finish, 2000).unref();
    if (inFlight === 0) finish();
  });
  tick();
}

main();
