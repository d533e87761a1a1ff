import { createServer, type Server } from 'node:http';
import Koa from 'koa';
import { toProblem } from '../http/errors.js';
import { writeProblem, HttpProblem } from '../http/problem.js';
import { health } from '../http/health.js';
import { adminOpenApiDocument } from './admin-openapi.js';
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

export function createAdminServer(metrics: MetricsText, ping: () => Promise<void>, log: Logger, refused?: () => string | undefined, api?: { middleware: Koa.Middleware; on: boolean }): Server {
  const app = new Koa();
  app.silent = true;
  app.use(async function handleErrors(ctx, next) {
    try {
      await next();
    } catch (err) {
      const problem = toProblem(err);
      if (problem.code === 'internal_error') log.error('admin request failed', { path: ctx.req.url, error: (err as Error).message });
      if (ctx.headerSent || !ctx.writable) {
        ctx.req.socket.destroy();
        return;
      }
      ctx.respond = false;
      writeProblem(ctx.res, problem);
    }
  });
  app.use(async function originFormOnly(ctx, next) {
    // Koa cannot parse some absolute-form targets (ctx.path would throw): refuse them first.
    if (!ctx.req.url?.startsWith('/')) throw new HttpProblem(400, 'invalid_path', 'the request target must be a path starting with /');
    await next();
  });
  app.use(health(ping, refused));
  // The admin API (API keys, users kept in the store) and the listener's own OpenAPI document.
  if (api) app.use(api.middleware);
  const document = adminOpenApiDocument(api?.on ?? false);
  app.use(async function serveOpenApi(ctx, next) {
    if (ctx.path !== '/openapi.json' || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) return next();
    ctx.body = document;
  });
  app.use(async function serveMetrics(ctx) {
    if (ctx.path !== '/metrics') throw new HttpProblem(404, 'not_found', 'the admin listener serves /metrics, /healthz, /readyz, /openapi.json and (with admin.apiToken) /v1/keys and /v1/users');
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      throw new HttpProblem(405, 'method_not_allowed', `${ctx.method} is not allowed here; use GET`, { headers: { Allow: 'GET, HEAD' } });
    }
    const text = await metrics.metrics();
    ctx.type = metrics.contentType;
    ctx.body = text;
  });
  return createServer(app.callback());
}
