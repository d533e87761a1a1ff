import { normalizePath } from './path.js';
import type { GatewayMiddleware } from './state.js';

/** Every later step (token routes, routing, forwarding) sees the one normalized spelling of the path. */
export function canonicalPath(): GatewayMiddleware {
  return async function canonicalizePath(ctx, next) {
    const normalized = normalizePath(ctx.path);
    if (normalized !== ctx.path) ctx.path = normalized;
    await next();
  };
}
