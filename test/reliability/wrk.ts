import { run, requireTool } from '../e2e/support/tools.js';

/** What wrk reports: requests answered, and each kind of failure it counts. */
export interface WrkResult {
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

/** Runs wrk (keep-alive connections, a closed one is reopened) against url for durationS seconds. */
export async function wrk(url: string, o: WrkOptions): Promise<WrkResult> {
  const file = requireTool('wrk');
  const args = ['-t', String(o.threads ?? 2), '-c', String(o.connections), '-d', `${o.durationS}s`, '--timeout', '5s'];
  for (const [k, v] of Object.entries(o.headers ?? {})) args.push('-H', `${k}: ${v}`);
  const { code, stdout, stderr } = await run(file, [...args, url], { timeoutMs: (o.durationS + 15) * 1000 });
  const output = `${stdout}${stderr}`;
  if (code !== 0) throw new Error(`wrk exited ${code}: ${output}`);
  const num = (re: RegExp) => Number(re.exec(output)?.[1] ?? 0);
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  return {
    requests: num(/(\d+) requests in/),
    non2xx: num(/Non-2xx or 3xx responses: (\d+)/),
    connect: Number(errors?.[1] ?? 0),
    read: Number(errors?.[2] ?? 0),
    write: Number(errors?.[3] ?? 0),
    timeout: Number(errors?.[4] ?? 0),
    output,
  };
}
