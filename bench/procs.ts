// Child processes of the bench: every one is tracked and killed on exit, error or signal.
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

const children = new Set<ChildProcess>();

/** A compiled bench script next to this file (dist/bench/NAME.js). */
export function benchScript(name: string): string {
  return fileURLToPath(new URL(`./${name}.js`, import.meta.url));
}

export function spawnTracked(command: string, args: string[], options: SpawnOptions = {}): ChildProcess {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  children.add(child);
  child.once('exit', () => children.delete(child));
  child.once('error', () => children.delete(child));
  return child;
}

/** SIGTERM to each child, SIGKILL to those still alive after graceMs. */
export async function stopChild(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export async function stopAll(): Promise<void> {
  await Promise.all([...children].map((c) => stopChild(c)));
}

/** Last resort, synchronous (process 'exit'): SIGKILL whatever is left. */
export function killAllNow(): void {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
}

/** Starts a node bench script that prints {"port":N,...} once listening. */
export function startService(name: string, args: string[] = []): Promise<{ child: ChildProcess; port: number; info: Record<string, unknown> }> {
  const child = spawnTracked(process.execPath, [benchScript(name), ...args]);
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const onData = (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      child.stdout!.off('data', onData);
      child.stdout!.resume();
      const info = JSON.parse(out.slice(0, nl)) as Record<string, unknown>;
      resolve({ child, port: Number(info.port), info });
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before listening: ${err.trim()}`)));
  });
}

/** Runs a bench script to completion with a JSON spec; resolves with the JSON it printed last. */
export function runJson<T>(name: string, spec: unknown, onStart?: (child: ChildProcess) => void): Promise<T> {
  const child = spawnTracked(process.execPath, [benchScript(name), JSON.stringify(spec)]);
  onStart?.(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.once('exit', (code, signal) => {
      const last = out.trim().split('\n').pop() ?? '';
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last) as T);
      else reject(new Error(`${name} failed (${code ?? signal}): ${err.trim() || out.trim()}`));
    });
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** A redis-server of the bench's own on 127.0.0.1 (no persistence); ready when it answers PING. */
export async function startRedis(dir: string): Promise<{ child: ChildProcess; url: string }> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const child = spawnTracked('redis-server', [
      '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning',
    ], { stdio: 'ignore' });
    const failed = new Promise<false>((resolve) => {
      child.once('exit', () => resolve(false));
      child.once('error', () => resolve(false));
    });
    if (await Promise.race([waitFor(() => ping(port), 5000), failed])) return { child, url: `redis://127.0.0.1:${port}` };
    await stopChild(child, 500);
  }
  throw new Error('redis-server did not start (is it installed? apt-get install redis-server)');
}

/** Polls until check() is true; false after timeoutMs. */
export async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    socket.once('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}

const CLOCK_TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** User + system CPU time a process has used so far, in ms (from /proc/PID/stat; NaN elsewhere). */
export async function cpuMs(pid: number): Promise<number> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/**
 * Waits until a process is idle (at most one clock tick of CPU in 200 ms), for at most timeoutMs; false
 * when it never was. A load can leave work queued behind it (bcrypt verifications still running after
 * the client hung up), and that must not be billed to the next run's CPU per request.
 */
export async function settle(pid: number, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let last = await cpuMs(pid);
  if (Number.isNaN(last)) return true; // no /proc: nothing to measure, nothing to wait for
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    const now = await cpuMs(pid);
    if (now - last <= 1000 / CLOCK_TICKS_PER_SECOND) return true;
    last = now;
  }
  return false;
}

/** VmRSS of a process in MB, from /proc (Linux); NaN elsewhere. */
export async function rssMb(pid: number): Promise<number> {
  return (await memory(pid)).rssMb;
}

/** VmRSS and its anonymous part (RssAnon: heap and stacks, without the mapped node binary) in MB. */
export async function memory(pid: number): Promise<{ rssMb: number; anonMb: number }> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)\\s+kB`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024;
    return { rssMb: field('VmRSS'), anonMb: field('RssAnon') };
  } catch {
    return { rssMb: Number.NaN, anonMb: Number.NaN };
  }
}
