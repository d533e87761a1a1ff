import cluster from 'node:cluster';
import { watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import { answerPrimary } from './admin/cluster.js';
import { inspectConfig } from './inspect.js';
import type { DrainPacing } from './http/drain.js';
import type { Config } from './config/types.js';
import { createLogger, exitAfterFlush, type Logger } from './log.js';
import { createGateway, type Gateway } from './server.js';
import { pacedByPrimary, runPrimary, STOP_MESSAGE } from './workers.js';

/** `serve`: this process serves, or (server.workers > 1) it is the primary of that many workers. */
export async function serve(config: Config, log: Logger = createLogger(config.log.level), options: RunOptions = {}): Promise<void> {
  if (config.server.workers > 1 && cluster.isPrimary) runPrimary(config, log);
  else await runGateway(config, log, options);
}

export interface RunOptions {
  /** Reload when the configuration file changes, as on SIGHUP. */
  watch?: boolean;
}

/**
 * Serves a configuration until SIGTERM/SIGINT, then shuts down gracefully and exits 0. SIGHUP (and with
 * `watch` a changed file) reloads the configuration file without a restart.
 */
async function runGateway(config: Config, log: Logger = createLogger(config.log.level), options: RunOptions = {}): Promise<Gateway> {
  const gateway = createGateway(config, { log });
  // Signals first, before anything is awaited: a SIGHUP during start-up (a primary passes one on to a
  // worker still starting) must reload, not kill, and a SIGTERM must drain what little there is.
  let stopping = false;
  const stop = (signal: string, accept: number | DrainPacing) => {
    if (stopping) {
      // A second signal does not wait for in-flight requests.
      log.warn('second signal; stopping at once', { signal });
      void exitAfterFlush(log, 1);
      return;
    }
    stopping = true;
    log.info('shutting down', { signal, acceptGraceMs: typeof accept === 'number' ? accept : 'as the primary says', graceMs: gateway.config.server.shutdownGraceMs });
    gateway.close(undefined, accept).then(
      () => {
        log.info('stopped');
        void exitAfterFlush(log, 0);
      },
      (err: unknown) => {
        log.error('shutdown failed', { error: String(err) });
        void exitAfterFlush(log, 1);
      },
    );
  };
  // SIGTERM comes from a supervisor (Kubernetes, systemd, docker stop) with a load balancer in front: keep
  // serving for the accept grace while it notices /readyz; SIGINT is a person at a terminal.
  process.on('SIGTERM', () => stop('SIGTERM', gateway.config.server.acceptGraceMs));
  process.on('SIGINT', () => stop('SIGINT', 0));
  const reload = (why: string) => {
    if (!stopping) reloadFrom(gateway, config.file, why, log);
  };
  process.on('SIGHUP', () => reload('SIGHUP'));
  if (options.watch && config.file) watchFile(config.file, () => reload('file changed'), log);
  // A worker's primary asks by message; with the same signal also from the terminal, it is still one stop.
  if (cluster.isWorker) process.on('message', (m) => m === STOP_MESSAGE && !stopping && stop('primary', pacedByPrimary()));

  // At most the store's connect timeout: an unreachable store must not hold the listener back for long.
  if (!(await gateway.store.waitUntilReady(config.store.kind === 'redis' ? config.store.connectTimeoutMs : 0))) {
    log.warn('redis not reachable yet; serving anyway (token requests get 503 and /readyz says so until it is)');
  }
  const port = await gateway.listen();
  log.info('auth-gateway listening', { host: config.server.host, port, tls: config.server.tls !== undefined, store: config.store.kind, routes: config.routes.map((r) => r.path) });
  if (cluster.isWorker) {
    // The primary serves the admin listener and asks each worker (one scrape, all workers).
    gateway.metrics.collectProcessMetrics();
    answerPrimary(gateway.metrics.registry, gateway.ready);
  } else if (config.admin !== false) {
    const adminPort = await gateway.listenAdmin();
    log.info('admin listening', { host: config.admin.host, port: adminPort, serves: ['/metrics', '/healthz', '/readyz'] });
  }
  return gateway;
}

/**
 * Reads the configuration file again, checked as a start would check it (the files it names
 * included); a broken one is logged, every problem, and the configuration in force stays.
 */
function reloadFrom(gateway: Gateway, file: string, why: string, log: Logger): boolean {
  const { config, problems, warnings } = inspectConfig(file);
  if (!config || problems.length > 0) {
    log.error('configuration not reloaded; the one in force stays', { why, file, problems });
    return false;
  }
  for (const warning of warnings) log.warn('configuration warning (see `auth-gateway config check`)', { warning });
  try {
    const { restartNeeded } = gateway.reload(config);
    log.info('configuration reloaded', { why, file, routes: config.routes.map((r) => r.path), upstreams: Object.keys(config.upstreams) });
    if (restartNeeded.length > 0) log.warn('these settings changed but take effect only after a restart', { settings: restartNeeded });
    return true;
  } catch (err) {
    log.error('configuration not reloaded; the one in force stays', { why, file, problems: [err instanceof Error ? err.message : String(err)] });
    return false;
  }
}

/** Editors replace a file rather than write it: watch its folder, and settle a burst of events first. */
function watchFile(file: string, changed: () => void, log: Logger): void {
  let timer: NodeJS.Timeout | undefined;
  const name = basename(file);
  const watcher = watch(dirname(file), { persistent: false }, (_event, which) => {
    if (which !== null && which !== name) return;
    clearTimeout(timer);
    timer = setTimeout(changed, 100);
  });
  watcher.on('error', (err) => log.error('configuration file watch failed', { file, error: err.message }));
}
