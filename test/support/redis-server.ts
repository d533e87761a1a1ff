import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './process.js';

/** A real redis-server of the test's own, on a free loopback port; it can be stopped and started again. */
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
    for (let attempt = 0; attempt < 5; attempt++) {
      port = port || (await freePort());
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
      child = spawn('redis-server', args, { stdio: 'ignore' });
      if (await waitForPing(port, child)) return;
      child.kill('SIGKILL');
      port = 0;
    }
    throw new Error('redis-server did not start (is it installed? apt-get install redis-server)');
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

/** Waits for PONG (never a fixed sleep); false when the process died or 5 s passed. */
async function waitForPing(port: number, child: ChildProcess): Promise<boolean> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) return false;
    if (await ping(port)) return true;
    await new Promise((r) => setTimeout(r, 20));
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
