import type { Logger } from '../log.js';
import type { GatewayMiddleware } from './state.js';

/** One line per request, written after the response (proxied ones included) has gone out. */
export function accessLog(log: Logger): GatewayMiddleware {
  return async function logAccess(ctx, next) {
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      log.info('request', {
        requestId: ctx.state.requestId,
        method: ctx.method,
        path: ctx.req.url?.startsWith('/') ? ctx.path : ctx.req.url?.slice(0, 200),
        status: ctx.respond === false ? ctx.res.statusCode : ctx.status,
        ms: Number(process.hrtime.bigint() - started) / 1e6,
        user: ctx.state.principal?.user,
        via: ctx.state.principal?.via,
      });
    }
  };
}
