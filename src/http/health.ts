import { HttpProblem } from './problem.js';
import type { GatewayMiddleware } from './state.js';

/**
 * /healthz: the process answers. /readyz: the configuration is loaded and the store answers.
 * Both unauthenticated and cheap; anything else passes on.
 */
export function health(ping: () => Promise<void>): GatewayMiddleware {
  return async function healthEndpoints(ctx, next) {
    if (ctx.path === '/healthz') {
      ctx.body = { status: 'ok' };
      return;
    }
    if (ctx.path === '/readyz') {
      try {
        await ping();
      } catch {
        throw new HttpProblem(503, 'service_unavailable', 'the token store is not reachable', { headers: { 'Retry-After': '1' } });
      }
      ctx.body = { status: 'ready' };
      return;
    }
    await next();
  };
}
