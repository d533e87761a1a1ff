import cluster from 'node:cluster';
import type { Config } from './config/types.js';
import { createLogger, type Logger } from './log.js';
import { createGateway, type Gateway } from './server.js';
import { RedisTokenStore } from './tokens/store/redis.js';
import { runPrimary, STOP_MESSAGE } from './workers.js';

/** `serve`: this process serves, or (server.workers > 1) it is the primary of that many workers. */
export async function serve(config: Config, log: Logger = createLogger(config.log.level)): Promise<void> {
  if (config.server.workers > 1 && cluster.isPrimary) runPrimary(config, log);
  else await runGateway(config, log);
}

/** Serves a configuration until SIGTERM/SIGINT, then shuts down gracefully and exits 0. */
export async function runGateway(config: Config, log: Logger = createLogger(config.log.level)): Promise<Gateway> {
  const gateway = createGateway(config, { log });
  if (gateway.store instanceof RedisTokenStore && !(await gateway.store.waitUntilReady(5000))) {
    log.warn('redis not reachable yet; serving anyway (token requests get 503 and /readyz says so until it is)');
  }
  const port = await gateway.listen();
  log.info('auth-gateway listening', { host: config.server.host, port, store: config.store.kind, routes: config.routes.map((r) => r.path) });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      // A second signal does not wait for in-flight requests.
      log.warn('second signal; stopping at once', { signal });
      process.exit(1);
    }
    stopping = true;
    log.info('shutting down', { signal, graceMs: config.server.shutdownGraceMs });
    gateway.close().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        log.error('shutdown failed', { error: String(err) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // A worker's primary asks by message; with the same signal also from the terminal, it is still one stop.
  if (cluster.isWorker) process.on('message', (m) => m === STOP_MESSAGE && !stopping && stop('primary'));
  return gateway;
}
