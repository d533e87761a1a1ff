import { normalizePath } from './path.js';
import { HttpProblem } from './problem.js';
import type { GatewayMiddleware } from './state.js';

/** Every later step (token routes, routing, forwarding) sees the one normalized spelling of the path. */
export function canonicalPath(): GatewayMiddleware {
  return async function canonicalizePath(ctx, next) {
    // Only origin-form targets (`/path?query`): Koa cannot even parse some absolute-form ones.
    if (!ctx.req.url?.startsWith('/')) throw new HttpProblem(400, 'invalid_path', 'the request target must be a path starting with /');
    const normalized = normalizePath(ctx.path);
    if (normalized !== ctx.path) ctx.path = normalized;
    await next();
  };
}
