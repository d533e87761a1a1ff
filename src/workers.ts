import cluster, { type Worker } from 'node:cluster';
import { Registry } from 'prom-client';
import { WorkerQuestions } from './admin/cluster.js';
import { createAdminServer } from './admin/admin-server.js';
import type { Config } from './config/types.js';
import { shuttingDown } from './http/problem.js';
import type { DrainPacing } from './http/drain.js';
import type { Logger } from './log.js';

/**
 * A drain under workers, paced by the primary so that every worker moves together (see Drain): the port
 * stays open until the last worker has closed its listener, so a worker that told its clients to reconnect
 * while another still listened would send them into a listener about to close, whose queued connections
 * the kernel resets. primary → worker: STOP (not ready; keep serving), STOP_ACCEPTING (after the accept
 * grace: close the listener); worker → primary: ACCEPT_STOPPED; primary → worker, once every worker has
 * closed (the port is closed now): CLOSE_CONNECTIONS (answers say Connection: close; finish and exit).
 */
export const STOP_MESSAGE = 'auth-gateway:stop';
const STOP_ACCEPTING = 'auth-gateway:stop-accepting';
const ACCEPT_STOPPED = 'auth-gateway:accept-stopped';
const CLOSE_CONNECTIONS = 'auth-gateway:close-connections';
/** A worker that has not closed its listener by then is not waited for. */
const ACCEPT_STOP_TIMEOUT_MS = 2000;

/** In a worker, on STOP: the drain's pacing as the primary sets it. */
export function pacedByPrimary(): DrainPacing {
  const next = (message: string) => new Promise<void>((resolve) => {
    const on = (m: unknown) => {
      if (m !== message) return;
      process.off('message', on);
      resolve();
    };
    process.on('message', on);
  });
  const acceptUntil = next(STOP_ACCEPTING);
  const closeConnections = next(CLOSE_CONNECTIONS);
  return {
    acceptUntil,
    listenerClosed: () => {
      if (process.connected) process.send?.(ACCEPT_STOPPED);
      return closeConnections;
    },
  };
}
/** A worker that dies on its own is replaced after this long (not at once: a crash loop must not spin). */
const RESPAWN_DELAY_MS = 1000;

/**
 * The primary of `server.workers` > 1: forks the workers (node:cluster; they share the port and, through
 * the store, all state), replaces one that dies, and owns the signals. SIGTERM/SIGINT: every worker is
 * told to drain (a message, not a signal, so a worker that also got the signal from the terminal's process
 * group does not count it twice) and the primary exits when they have; a second signal is passed on as a
 * signal, so workers stop at once. SIGHUP is passed on to every worker. The admin listener is the
 * primary's: /metrics sums the workers' series, /readyz is ready when every worker is (503 from the first
 * signal on), so one scrape or probe speaks for all of them.
 */
export function runPrimary(config: Config, log: Logger): void {
  /** The drain's messages sent so far (a worker that starts listening late gets them all). */
  const sent: string[] = [];
  let stopping = false;
  const respawn = new Set<NodeJS.Timeout>();
  const fork = () => cluster.fork();
  for (let i = 0; i < config.server.workers; i++) fork();
  log.info('auth-gateway primary started', { workers: config.server.workers, pid: process.pid });

  let failed = false;
  const workers = () => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
  // A worker still starting cannot take the stop message yet: it gets it once it listens.
  const listening = new Set<number>();
  cluster.on('listening', (worker: Worker) => {
    listening.add(worker.id);
    for (const m of sent) worker.send(m);
  });
  // The admin listener's questions to the workers (it keeps what dead workers counted).
  const questions = config.admin !== false ? new WorkerQuestions(() => workers().filter((w) => listening.has(w.id))) : undefined;
  cluster.on('exit', (worker: Worker, code: number | null, signal: string | null) => {
    const listened = listening.delete(worker.id);
    void questions?.retire(worker.id).catch(() => {});
    if (!stopping && !listened && listening.size === 0) {
      // It died before it listened (the port is taken, a certificate does not load, ...) and no worker
      // serves: the next one would fail too. The primary stops (the others are still starting and serve
      // nobody), so that the supervisor sees a failed start, not a crash loop.
      log.error('a worker failed to start; stopping', { pid: worker.process.pid, code, signal });
      stopping = true;
      for (const t of respawn) clearTimeout(t);
      failed = true;
      for (const w of workers()) w.process.kill('SIGKILL');
      if (workers().length === 0) process.exit(1);
      return;
    }
    if (!stopping) {
      log.error('worker died; starting another', { pid: worker.process.pid, code, signal });
      const timer = setTimeout(() => {
        respawn.delete(timer);
        if (!stopping) fork();
      }, RESPAWN_DELAY_MS);
      respawn.add(timer);
      return;
    }
    // A worker that did not drain cleanly makes the primary's exit code 1.
    if (code !== 0) failed = true;
    if (Object.keys(cluster.workers ?? {}).length === 0) {
      log.info('all workers stopped');
      process.exit(failed ? 1 : 0);
    }
  });

  if (config.admin !== false && questions) {
    const ready = () => (stopping ? Promise.reject(shuttingDown()) : questions.ready());
    const admin = createAdminServer({ contentType: Registry.PROMETHEUS_CONTENT_TYPE, metrics: () => questions.metrics() }, ready, log);
    const { host, port } = config.admin;
    admin.once('error', (err) => {
      log.error('admin listener failed', { host, port, error: err.message });
      process.exit(1);
    });
    admin.listen(port, host, () => {
      const address = admin.address();
      log.info('admin listening', { host, port: typeof address === 'object' && address ? address.port : port, serves: ['/metrics', '/healthz', '/readyz'], workers: config.server.workers });
    });
  }
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn('second signal; workers stop at once', { signal });
      for (const w of workers()) w.process.kill(signal);
      return;
    }
    stopping = true;
    for (const t of respawn) clearTimeout(t);
    // SIGINT is a person at a terminal: no accept grace (see runGateway).
    const acceptGraceMs = signal === 'SIGINT' ? 0 : config.server.acceptGraceMs;
    log.info('shutting down workers', { signal, workers: workers().length, acceptGraceMs });
    if (workers().length === 0) process.exit(0);
    const broadcast = (m: string) => {
      sent.push(m);
      for (const w of workers()) if (listening.has(w.id) && w.isConnected()) w.send(m);
    };
    broadcast(STOP_MESSAGE);
    setTimeout(() => {
      const waiting = new Set(workers().filter((w) => listening.has(w.id) && w.isConnected()).map((w) => w.id));
      let done = false;
      const closeConnections = () => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        cluster.off('message', onMessage);
        broadcast(CLOSE_CONNECTIONS);
      };
      const onMessage = (w: Worker, m: unknown) => {
        if (m !== ACCEPT_STOPPED) return;
        waiting.delete(w.id);
        if (waiting.size === 0) closeConnections();
      };
      const timer = setTimeout(closeConnections, ACCEPT_STOP_TIMEOUT_MS);
      cluster.on('message', onMessage);
      cluster.on('exit', (w) => {
        waiting.delete(w.id);
        if (waiting.size === 0) closeConnections();
      });
      broadcast(STOP_ACCEPTING);
      if (waiting.size === 0) closeConnections();
    }, acceptGraceMs);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => {
    for (const w of workers()) w.process.kill('SIGHUP');
  });
}
