import { spawn } from 'node:child_process';
import { requireTool } from '../e2e/support/tools.js';

/** What wrk reports: requests answered, and each kind of failure it counts. */
interface WrkResult {
  requests: number;
  /** Answers other than 2xx/3xx. */
  non2xx: number;
  /** Connections refused or not established. */
  connect: number;
  /** Reads that failed: a reset, or the connection closed before the whole answer. */
  read: number;
  write: number;
  timeout: number;
  output: string;
}

export interface WrkOptions {
  connections: number;
  threads?: number;
  durationS: number;
  headers?: Record<string, string>;
}

/** A running wrk: stop() ends it early (SIGINT: wrk stops and prints its summary). */
export interface WrkRun {
  result: Promise<WrkResult>;
  stop(): void;
}

/**
 * Runs wrk (keep-alive connections, a closed one is reopened at once) against url for at most durationS
 * seconds. Stop it once the port is closed: it reconnects in a tight loop, and each refused attempt takes
 * an ephemeral port that another test may be about to listen on.
 */
export function wrk(url: string, o: WrkOptions): WrkRun {
  const file = requireTool('wrk');
  const args = ['-t', String(o.threads ?? 2), '-c', String(o.connections), '-d', `${o.durationS}s`, '--timeout', '5s'];
  for (const [k, v] of Object.entries(o.headers ?? {})) args.push('-H', `${k}: ${v}`);
  const child = spawn(file, [...args, url], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), (o.durationS + 15) * 1000);
  const result = new Promise<WrkResult>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`wrk exited ${code}: ${output}`));
      const num = (re: RegExp) => Number(re.exec(output)?.[1] ?? 0);
      const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
      resolve({
        requests: num(/(\d+) requests in/),
        non2xx: num(/Non-2xx or 3xx responses: (\d+)/),
        connect: Number(errors?.[1] ?? 0),
        read: Number(errors?.[2] ?? 0),
        write: Number(errors?.[3] ?? 0),
        timeout: Number(errors?.[4] ?? 0),
        output,
      });
    });
  });
  return { result, stop: () => child.kill('SIGINT') };
}
