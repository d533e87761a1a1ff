import { HttpProblem } from './problem.js';
import type { GatewayContext, GatewayMiddleware } from './state.js';

/**
 * /healthz: the process answers. /readyz: the configuration is loaded and the store answers.
 * Both unauthenticated and cheap; anything else passes on.
 */
export function health(ping: () => Promise<void>): GatewayMiddleware {
  // Not async: every other request passes through without a promise of its own.
  return function healthEndpoints(ctx, next) {
    if (ctx.path === '/healthz') {
      ctx.body = { status: 'ok' };
      return Promise.resolve();
    }
    if (ctx.path === '/readyz') return ready(ctx, ping);
    return next();
  };
}

async function ready(ctx: GatewayContext, ping: () => Promise<void>): Promise<void> {
  try {
    await ping();
  } catch (err) {
    // A check that says why (the gateway is shutting down) is passed on as it is.
    if (err instanceof HttpProblem) throw err;
    throw new HttpProblem(503, 'service_unavailable', 'the token store is not reachable', { headers: { 'Retry-After': '1' } });
  }
  ctx.body = { status: 'ready' };
}
