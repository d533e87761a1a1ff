import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { expect } from 'vitest';
import { startNode, type Child } from '../support/process.js';
import { request, type RawResult } from '../support/raw-client.js';

export { refused } from '../support/raw-client.js';

/** The built CLI: `npm test` (pretest) or `npm run -s build` makes it. RELIABILITY_CLI points at another build (to try a fix). */
const ROOT = join(import.meta.dirname, '../..');
const CLI = process.env.RELIABILITY_CLI ?? join(ROOT, 'dist/src/main.js');
const JWT_SECRET = 'reliability-secret-reliability-secret-0123456789';

export function requireBuiltCli(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run -s build (npm test does it first)`);
}

export type Answer = RawResult;

export interface SendOptions {
  method?: string;
  headers?: OutgoingHttpHeaders;
  body?: string;
  /** Bounds the whole exchange (default 5 s): before the headers it rejects, after them the body counts as cut. */
  timeoutMs?: number;
  /** Count the body's bytes without keeping them. */
  countOnly?: boolean;
  /** Called with each chunk's size (progress). */
  onData?: (size: number) => void;
}

/**
 * One request on a fresh raw connection (no pooling can hide a dead or cut connection).
 * Rejects when no response arrives (refused, reset before headers, timeout); resolves with `bodyError`
 * when the response started and then was cut.
 */
export function send(port: number, path: string, options: SendOptions = {}): Promise<Answer> {
  const { onData } = options;
  return request(port, path, {
    method: options.method, headers: options.headers, body: options.body, timeoutMs: options.timeoutMs,
    keepBody: !options.countOnly, onBody: onData && ((c) => onData(c.length)),
  });
}

/** Asserts an application/problem+json answer with the status and code. */
export function expectProblem(a: Answer, status: number, code: string): Record<string, unknown> {
  expect(a.status, a.body.toString('utf8')).toBe(status);
  expect(a.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = JSON.parse(a.body.toString('utf8')) as Record<string, unknown>;
  expect(body).toMatchObject({ status, code });
  return body;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The one polling helper (test/support/poll.ts), as the reliability suite has always called it. */
export { eventually } from '../support/poll.js';

/** The process's resident set size in bytes (Linux /proc). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/** A test upstream whose behaviour the test swaps per request; tracks its timers so close() ends them. */
export interface ScriptedUpstream {
  url: string;
  port: number;
  server: Server;
  /** Requests that reached it. */
  hits: number;
  handler: (req: IncomingMessage, res: ServerResponse) => void;
  later(ms: number, fn: () => void): void;
  connections(): Promise<number>;
  close(): Promise<void>;
  /** Listens again on the same port (after close). */
  reopen(): Promise<void>;
}

export async function scriptedUpstream(port = 0, keepAliveTimeoutMs = 30_000): Promise<ScriptedUpstream> {
  const timers = new Set<NodeJS.Timeout>();
  const make = () => {
    const server = createServer((req, res) => {
      up.hits++;
      // Read the (empty) request body before answering, like a real service.
      req.resume();
      up.handler(req, res);
    });
    // Longer than the gateway agent's idle timeout (4 s), so the agent, not the upstream, ends idle sockets.
    server.keepAliveTimeout = keepAliveTimeoutMs;
    return server;
  };
  const listen = (server: Server, p: number) => new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(p, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
  });
  const up: ScriptedUpstream = {
    url: '',
    port: 0,
    server: make(),
    hits: 0,
    handler: (_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end('{"ok":true}');
    },
    later: (ms, fn) => {
      const t = setTimeout(() => {
        timers.delete(t);
        fn();
      }, ms);
      timers.add(t);
    },
    connections: () => new Promise((resolve, reject) => up.server.getConnections((err, n) => (err ? reject(err) : resolve(n)))),
    close: () => new Promise((resolve) => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      up.server.closeAllConnections();
      if (!up.server.listening) return resolve();
      up.server.close(() => resolve());
    }),
    reopen: async () => {
      // Its old port, which another process may have taken for a moment since (its own port 0): bounded retries.
      for (let attempt = 0; ; attempt++) {
        up.server = make();
        try {
          await listen(up.server, up.port);
          return;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 50) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    },
  };
  up.port = await listen(up.server, port);
  up.url = `http://127.0.0.1:${up.port}`;
  return up;
}

export interface GatewayProcessOptions {
  dir: string;
  port: number;
  usersFile: string;
  upstreams: Record<string, { url: string; timeoutMs?: number; maxConnections?: number; maxQueued?: number }>;
  routes: Array<{ path: string; upstream: string }>;
  shutdownGraceMs?: number;
  /** server.acceptGraceMs (default: the shipped default). */
  acceptGraceMs?: number;
  /** The admin listener's port (default 0: any). */
  adminPort?: number;
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** server.workers (default 1: no workers). */
  workers?: number;
  /** The store section (default: memory). */
  store?: Record<string, unknown>;
}

/** Writes a YAML configuration the way an operator would (secret from ${GATEWAY_JWT_SECRET}) and runs the built CLI on it. */
export function startGatewayProcess(o: GatewayProcessOptions): Child {
  const file = join(o.dir, 'gateway.yaml');
  writeFileSync(file, stringify({
    server: {
      host: '127.0.0.1', port: o.port, shutdownGraceMs: o.shutdownGraceMs ?? 2000,
      ...(o.acceptGraceMs !== undefined ? { acceptGraceMs: o.acceptGraceMs } : {}),
      ...(o.workers ? { workers: o.workers } : {}),
    },
    store: o.store ?? { kind: 'memory' },
    users: { htpasswd: o.usersFile, watch: false },
    tokens: { signing: { alg: 'HS256', secret: '${GATEWAY_JWT_SECRET}' } },
    upstreams: o.upstreams,
    routes: o.routes,
    log: { level: o.logLevel ?? 'info', access: false },
    admin: { host: '127.0.0.1', port: o.adminPort ?? 0 },
  }));
  return startNode(CLI, ['serve', '--config', file], { GATEWAY_JWT_SECRET: JWT_SECRET });
}

/** Resolves with the exit code when the process exits, or rejects after timeoutMs. */
export function exited(child: Child, timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve, reject) => {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) {
      return resolve({ code: child.proc.exitCode, signal: child.proc.signalCode });
    }
    const timer = setTimeout(() => reject(new Error(`the process did not exit within ${timeoutMs} ms:\n${child.output()}`)), timeoutMs);
    child.proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

/** Kills a child still running (afterAll, also after a failed test). */
export async function killIfRunning(child: Child | undefined): Promise<void> {
  if (!child || child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  await child.stop('SIGKILL');
}
