import cluster, { type Worker } from 'node:cluster';
import type { Config } from './config/types.js';
import type { Logger } from './log.js';

/** The message a primary sends a worker to drain and stop, with the accept grace (SIGTERM; see runGateway). */
export const STOP_MESSAGE = 'auth-gateway:stop';
/** The same without the accept grace (SIGINT). */
export const STOP_NOW_MESSAGE = 'auth-gateway:stop-now';
/** A worker that dies on its own is replaced after this long (not at once: a crash loop must not spin). */
const RESPAWN_DELAY_MS = 1000;

/**
 * The primary of `server.workers` > 1: forks the workers (node:cluster; they share the port and, through
 * the store, all state), replaces one that dies, and owns the signals. SIGTERM/SIGINT: every worker is
 * told to drain (a message, not a signal, so a worker that also got the signal from the terminal's process
 * group does not count it twice) and the primary exits when they have; a second signal is passed on as a
 * signal, so workers stop at once. SIGHUP is passed on to every worker.
 */
export function runPrimary(config: Config, log: Logger): void {
  let stopping: typeof STOP_MESSAGE | typeof STOP_NOW_MESSAGE | undefined;
  const respawn = new Set<NodeJS.Timeout>();
  const fork = () => cluster.fork();
  for (let i = 0; i < config.server.workers; i++) fork();
  log.info('auth-gateway primary started', { workers: config.server.workers, pid: process.pid });

  let failed = false;
  // A worker still starting cannot take the stop message yet: it gets it once it listens.
  const listening = new Set<number>();
  cluster.on('listening', (worker: Worker) => {
    listening.add(worker.id);
    if (stopping) worker.send(stopping);
  });
  cluster.on('exit', (worker: Worker, code: number | null, signal: string | null) => {
    listening.delete(worker.id);
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

  const workers = () => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn('second signal; workers stop at once', { signal });
      for (const w of workers()) w.process.kill(signal);
      return;
    }
    const message = signal === 'SIGINT' ? STOP_NOW_MESSAGE : STOP_MESSAGE;
    stopping = message;
    for (const t of respawn) clearTimeout(t);
    log.info('shutting down workers', { signal, workers: workers().length });
    if (workers().length === 0) process.exit(0);
    for (const w of workers()) if (listening.has(w.id) && w.isConnected()) w.send(message);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => {
    for (const w of workers()) w.process.kill('SIGHUP');
  });
}
