import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { candidatePort } from '../../support/process.js';
import { requireTool } from './tools.js';

export interface Nginx {
  port: number;
  /** Its own directory: configuration, pid, logs, temp files. */
  dir: string;
  /** The access log so far, one line per request (format `e2e`, see below). */
  accessLog(): string[];
  errorLog(): string;
  stop(): Promise<void>;
}

/**
 * What every request line of the access log says, so tests can read what reached this nginx:
 * the peer, the request line, the status, and the headers the gateway sets or must remove.
 */
const LOG_FORMAT = `'$remote_addr "$request" $status $body_bytes_sent ` +
  `user=$http_x_authenticated_user via=$http_x_authenticated_via te=$http_transfer_encoding ` +
  `auth=$http_authorization xff="$http_x_forwarded_for" rid=$http_x_request_id'`;

/**
 * A real nginx of the test's own: in the foreground (`daemon off`), with its prefix, configuration,
 * pid, logs and temp paths in a temp directory, on a free loopback port. `servers(port)` gives the
 * http-level configuration (server blocks). Stopped (and its directory removed) by stop().
 */
export async function startNginx(servers: (port: number, dir: string) => string): Promise<Nginx> {
  const nginx = requireTool('nginx');
  const dir = mkdtempSync(join(tmpdir(), 'gw-e2e-nginx-'));
  for (const t of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, 'tmp', t), { recursive: true });
  const errorLog = join(dir, 'error.log');
  let lastOutput = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    // nginx cannot listen on port 0 and say which port it got: a port picked first, and on a failed
    // start (another process took it) another one.
    const port = await candidatePort();
    const conf = join(dir, 'nginx.conf');
    writeFileSync(conf, [
      // As root the workers would switch to `nobody`, who cannot read the temp directory.
      process.getuid?.() === 0 ? 'user root;' : '',
      'worker_processes 1;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${errorLog} warn;`,
      'events { worker_connections 256; }',
      'http {',
      `  log_format e2e ${LOG_FORMAT};`,
      `  access_log ${join(dir, 'access.log')} e2e;`,
      ...['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t === 'body' ? 'client_body' : t}_temp_path ${join(dir, 'tmp', t)};`),
      '  default_type application/octet-stream;',
      '  types { text/plain txt; application/octet-stream bin; }',
      servers(port, dir),
      '}',
      '',
    ].join('\n'));
    const child = spawn(nginx, ['-p', dir, '-c', conf, '-e', errorLog, '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    if (await listening(port, child, join(dir, 'nginx.pid'))) {
      return {
        port,
        dir,
        accessLog: () => read(join(dir, 'access.log')).split('\n').filter(Boolean),
        errorLog: () => read(errorLog),
        stop: async () => {
          await stopChild(child, 'SIGTERM');
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    await stopChild(child, 'SIGKILL');
    lastOutput = `${output}\n${read(errorLog)}`;
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`nginx did not start:\n${lastOutput}`);
}

/**
 * fcgiwrap on a unix socket in `dir`: nginx's CGI host. One process (no -c prefork, so stopping it
 * leaves no children behind), which forks each CGI request; git makes its requests one at a time.
 */
export async function startFcgiwrap(dir: string): Promise<{ socket: string; stop(): Promise<void> }> {
  const fcgiwrap = requireTool('fcgiwrap');
  const socket = join(dir, 'fcgiwrap.sock');
  const child = spawn(fcgiwrap, ['-s', `unix:${socket}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const deadline = Date.now() + 5000;
  while (!existsSync(socket)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stopChild(child, 'SIGKILL');
      throw new Error(`fcgiwrap did not start: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return { socket, stop: () => stopChild(child, 'SIGTERM') };
}

function read(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Whether the child listens on the port: its pid file names it (nginx and Caddy write it only once their
 * listeners are bound) and the port takes a connection. A connection alone could reach another process
 * that holds the port while this one is still failing to bind it.
 */
export async function listening(port: number, child: ChildProcess, pidFile: string, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    const ok = read(pidFile).trim() === String(child.pid) && await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

/** Signals a child and waits for its exit; SIGKILL after 3 s. */
export function stopChild(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 3000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill(signal);
  });
}
