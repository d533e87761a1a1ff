import { createServer, type Server } from 'node:http';
import Koa from 'koa';
import { errorHandler } from '../http/errors.js';
import { health } from '../http/health.js';
import { HttpProblem } from '../http/problem.js';
import type { GatewayState } from '../http/state.js';
import type { Logger } from '../log.js';

/**
 * The admin listener: /metrics (Prometheus text), /healthz and /readyz, on an address of its own
 * (loopback by default), never on the public port. Plain HTTP and unauthenticated, so it belongs on a
 * private interface; it answers nothing else.
 */
/** What /metrics serves: a registry, or (server.workers) the sum over the workers. */
export interface MetricsText {
  readonly contentType: string;
  metrics(): Promise<string>;
}

export function createAdminServer(metrics: MetricsText, ping: () => Promise<void>, log: Logger, refused?: () => string | undefined): Server {
  const app = new Koa<GatewayState>();
  app.silent = true;
  app.use(errorHandler(log));
  app.use(async function originFormOnly(ctx, next) {
    // Koa cannot parse some absolute-form targets (ctx.path would throw): refuse them first.
    if (!ctx.req.url?.startsWith('/')) throw new HttpProblem(400, 'invalid_path', 'the request target must be a path starting with /');
    await next();
  });
  app.use(health(ping, refused));
  app.use(async function serveMetrics(ctx) {
    if (ctx.path !== '/metrics') throw new HttpProblem(404, 'not_found', 'the admin listener serves /metrics, /healthz and /readyz');
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      throw new HttpProblem(405, 'method_not_allowed', `${ctx.method} is not allowed here; use GET`, { headers: { Allow: 'GET, HEAD' } });
    }
    const text = await metrics.metrics();
    ctx.type = metrics.contentType;
    ctx.body = text;
  });
  return createServer(app.callback());
}
