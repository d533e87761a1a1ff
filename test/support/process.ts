import { spawn, type ChildProcess } from 'node:child_process';
import { get } from 'node:http';
import { createServer } from 'node:net';

export interface Child {
  proc: ChildProcess;
  output(): string;
  /** Sends a signal (default SIGINT: SIGTERM waits server.acceptGraceMs first) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** A node process of the project's, with its output kept for assertions. */
export function startNode(script: string, args: string[], env: Record<string, string>): Child {
  const proc = spawn(process.execPath, [script, ...args], { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return {
    proc,
    output: () => out,
    stop: (signal = 'SIGINT') => new Promise((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve(proc.exitCode);
      proc.once('exit', (code) => resolve(code));
      proc.kill(signal);
    }),
  };
}

/**
 * A loopback port for a process the test starts with an explicit port (a gateway, a redis-server, nginx).
 * Not one the kernel picks (listen on port 0 and close): that comes from the ephemeral range, which every
 * outgoing connection of every test file also draws from, so between the pick and the child's bind a
 * connection elsewhere could take it (seen as EADDRINUSE), and a redis-server restarted on its old port
 * could find it gone. These come from below the ephemeral range (a cluster node's bus port, port + 10000,
 * too), in a block of their own per vitest worker, and are checked free before they are handed out.
 */
const PORT_BASE = 10_000;
const PORT_BLOCK = 1000;
const block = Number(process.env.VITEST_POOL_ID ?? process.pid) % 10;
let nextPort = 0;

export async function freePort(): Promise<number> {
  for (let tries = 0; tries < PORT_BLOCK; tries++) {
    const port = PORT_BASE + block * PORT_BLOCK + (nextPort++ % PORT_BLOCK);
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port in ${PORT_BASE + block * PORT_BLOCK}..${PORT_BASE + (block + 1) * PORT_BLOCK - 1}`);
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** Polls url until it answers with `status` (default 200); throws with the child's output after timeoutMs. */
export async function waitForHttp(url: string, child?: Child, timeoutMs = 10_000, status = 200): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child && child.proc.exitCode !== null) throw new Error(`process exited early:\n${child.output()}`);
    // A fresh connection closed after the answer, as a health check makes it: an idle pooled one would
    // keep a draining gateway waiting for its keep-alive timeout.
    if ((await probe(url)) === status) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not answer ${status} in time${child ? `:\n${child.output()}` : ''}`);
}

/** The status of a GET on a fresh connection, or undefined when none came within a second. */
function probe(url: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = get(url, { agent: false, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}
