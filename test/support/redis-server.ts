import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { candidatePort } from './process.js';

/**
 * A real redis-server of the test's own, on a loopback port; it can be stopped and started again (on the
 * same port). redis-server cannot listen on port 0 and report the port, so the port is picked first
 * (`candidatePort`): when another process took it in the meantime, this one fails to bind (or answers as
 * another process) and the start is tried again on another port.
 */
export interface TestRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  /** Stops it at once (SIGKILL): a crash, nothing saved. */
  kill(): Promise<void>;
  /** Freezes it (SIGSTOP): connections stay open and nothing answers, like a hung host. */
  pause(): void;
  resume(): void;
  start(): Promise<void>;
  /** Stops and removes its data directory. */
  destroy(): Promise<void>;
}

export interface RedisServerOptions {
  appendOnly?: boolean;
  /** More redis-server arguments (cluster mode, replicaof, ...). */
  args?: string[];
  /** Instead of the usual arguments: a config file written into the data directory (Sentinel). */
  configFile?: (port: number, dir: string) => { text: string; args: string[] };
}

export async function startRedis(options: RedisServerOptions = {}): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-redis-'));
  let child: ChildProcess | undefined;
  let port = 0;
  const start = async () => {
    // A restart keeps its port (the gateway under test was configured with it); a first start that loses
    // its port to another process tries another.
    const restart = port !== 0;
    let lastOutput = '';
    for (let attempt = 0; attempt < 8; attempt++) {
      port = restart ? port : await candidatePort();
      let args = [
        '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir,
        '--appendonly', options.appendOnly ? 'yes' : 'no', '--appendfsync', 'always',
        '--daemonize', 'no', '--loglevel', 'warning', ...(options.args ?? []),
      ];
      if (options.configFile) {
        const file = join(dir, 'redis.conf');
        const made = options.configFile(port, dir);
        writeFileSync(file, made.text);
        args = [file, ...made.args];
      }
      const spawned = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      spawned.stdout!.on('data', (d: Buffer) => (output += d.toString()));
      spawned.stderr!.on('data', (d: Buffer) => (output += d.toString()));
      child = spawned;
      if (await waitForOwnPing(port, spawned)) return;
      lastOutput = output;
      await new Promise<void>((resolve) => {
        if (spawned.exitCode !== null || spawned.signalCode !== null) return resolve();
        spawned.once('exit', () => resolve());
        spawned.kill('SIGKILL');
      });
      child = undefined;
      if (restart) await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`redis-server did not start on 127.0.0.1:${port} (is it installed? apt-get install redis-server):\n${lastOutput}`);
  };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill(signal);
    });
  };
  await start();
  return {
    get url() {
      return `redis://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    stop: () => stop(),
    kill: () => stop('SIGKILL'),
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    start,
    destroy: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Waits until the redis-server on `port` is the child's own (its INFO names the child's pid: a
 * redis-server of another process on the same port does not count); never a fixed sleep. False when the
 * child died (it could not bind) or 5 s passed.
 */
async function waitForOwnPing(port: number, child: ChildProcess): Promise<boolean> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    const pid = await serverPid(port);
    if (pid !== undefined && pid === child.pid) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

/**
 * The process_id in the INFO of whatever answers on the port, once it also answers PING (not while it
 * loads its data), or undefined (nothing there, not ready yet).
 */
function serverPid(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let text = '';
    const done = (pid: number | undefined) => {
      socket.destroy();
      resolve(pid);
    };
    socket.setTimeout(500, () => done(undefined));
    socket.once('error', () => done(undefined));
    socket.connect(port, '127.0.0.1', () => socket.write('INFO server\r\nPING\r\n'));
    socket.on('data', (d: Buffer) => {
      text += d.toString();
      if (text.startsWith('-') || /\r\n-[^\r\n]*\r\n$/.test(text)) return done(undefined);
      if (!text.endsWith('\r\n+PONG\r\n')) return;
      const pid = /\r\nprocess_id:(\d+)\r\n/.exec(text)?.[1];
      done(pid ? Number(pid) : undefined);
    });
  });
}
