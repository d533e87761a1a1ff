import { HttpProblem } from './problem.js';
import type { Context, Middleware } from 'koa';

/** /healthz: the process answers. */
export function healthz(ctx: Context): void {
  ctx.body = { status: 'ok' };
}

/**
 * /readyz: the configuration is loaded and the store answers. `refused` says which writes the store
 * refuses while ready (store.durability strict without its replicas): every instance alike, so taking
 * instances out would help none, and bearer requests are still served.
 */
export function readyz(ping: () => Promise<void>, refused: () => string | undefined = () => undefined): (ctx: Context) => Promise<void> {
  return async function ready(ctx) {
    try {
      await ping();
    } catch (err) {
      // A check that says why (the gateway is shutting down) is passed on as it is.
      if (err instanceof HttpProblem) throw err;
      throw new HttpProblem(503, 'service_unavailable', 'the token store is not reachable', { headers: { 'Retry-After': '1' } });
    }
    const note = refused();
    ctx.body = note ? { status: 'ready', refused: note } : { status: 'ready' };
  };
}

/** Both as one middleware (the admin listener); anything else passes on. */
export function health(ping: () => Promise<void>, refused?: () => string | undefined): Middleware {
  const ready = readyz(ping, refused);
  return function healthEndpoints(ctx, next) {
    if (ctx.path === '/healthz') {
      healthz(ctx);
      return Promise.resolve();
    }
    if (ctx.path === '/readyz') return ready(ctx);
    return next();
  };
}
