import type { Config } from './config/types.js';
import { createLogger, exitAfterFlush, type Logger } from './log.js';
import { createGateway, type Gateway } from './server.js';
import { RedisTokenStore } from './tokens/store/redis.js';

/** Serves a configuration until SIGTERM/SIGINT, then shuts down gracefully and exits 0. */
export async function runGateway(config: Config, log: Logger = createLogger(config.log.level)): Promise<Gateway> {
  const gateway = createGateway(config, { log });
  if (gateway.store instanceof RedisTokenStore && !(await gateway.store.waitUntilReady(5000))) {
    log.warn('redis not reachable yet; serving anyway (token requests get 503 and /readyz says so until it is)');
  }
  const port = await gateway.listen();
  log.info('auth-gateway listening', { host: config.server.host, port, tls: config.server.tls !== undefined, store: config.store.kind, routes: config.routes.map((r) => r.path) });
  if (config.admin !== false) {
    const adminPort = await gateway.listenAdmin();
    log.info('admin listening', { host: config.admin.host, port: adminPort, serves: ['/metrics', '/healthz', '/readyz'] });
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      // A second signal does not wait for in-flight requests.
      log.warn('second signal; stopping at once', { signal });
      void exitAfterFlush(log, 1);
      return;
    }
    stopping = true;
    log.info('shutting down', { signal, graceMs: config.server.shutdownGraceMs });
    gateway.close().then(
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
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  return gateway;
}
