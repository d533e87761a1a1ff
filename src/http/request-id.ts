import { randomUUID } from 'node:crypto';
import type { GatewayContext, GatewayMiddleware } from './state.js';

const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/;

/** Accepts a well-formed X-Request-Id or makes one, and echoes it on the response. */
export function assignRequestId(ctx: GatewayContext): void {
  const offered = ctx.req.headers['x-request-id'];
  const id = typeof offered === 'string' && WELL_FORMED.test(offered) ? offered : randomUUID();
  ctx.state.requestId = id;
  ctx.res.setHeader('X-Request-Id', id);
}

/** assignRequestId as a middleware of its own (the WebSocket handshake's chain). */
export function requestId(): GatewayMiddleware {
  return function assignId(ctx, next) {
    assignRequestId(ctx);
    return next();
  };
}
