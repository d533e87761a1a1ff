import { spawn, type ChildProcess } from 'node:child_process';
import { get } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';

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
 * A gateway started by a test listens on port 0 (`server.port: 0`, `admin.port: 0`) and the test reads the
 * port it got from its `auth-gateway listening` / `admin listening` log line (needs `log.level` info or
 * debug). No port is picked first and bound later: between the two another process (this suite's other
 * files, a second `npm test`) could take it.
 */
export async function loggedPort(child: Child, msg = 'auth-gateway listening', timeoutMs = 15_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const line of child.output().split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const entry = JSON.parse(line) as { msg?: unknown; port?: unknown };
        if (entry.msg === msg && typeof entry.port === 'number' && entry.port > 0) return entry.port;
      } catch {
        // a line still being written: the next round reads it whole
      }
    }
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) throw new Error(`process exited before "${msg}":\n${child.output()}`);
    if (Date.now() > deadline) throw new Error(`no "${msg}" line within ${timeoutMs} ms:\n${child.output()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A loopback port on which nothing listens (connection refused): one the kernel has just handed out and
 * taken back. For tests of what an unreachable store or upstream looks like; never to bind later.
 */
export async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', resolve);
  });
  const { port } = srv.address() as AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/**
 * A port for a third-party program that cannot listen on port 0 and report the port back (redis-server,
 * nginx, caddy): a random one, below the ephemeral range (outgoing connections do not draw from it; a
 * cluster node's bus port, port + 10000, stays below 65536 too), free at the moment it is handed out. Two
 * processes can still get the same one: every caller starts the program with it and, when the program
 * fails to bind, asks for another and starts it again (`startRedis`, `startNginx`, `startCaddy`).
 */
export async function candidatePort(): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    const port = CANDIDATE_LOW + Math.floor(Math.random() * (CANDIDATE_HIGH - CANDIDATE_LOW));
    if (await bindable(port) && await bindable(port + 10_000)) return port;
  }
  throw new Error(`no free port in ${CANDIDATE_LOW}..${CANDIDATE_HIGH} after 100 tries`);
}

const CANDIDATE_LOW = 10_000;
const CANDIDATE_HIGH = 22_000;

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
