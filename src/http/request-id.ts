import { randomUUID } from 'node:crypto';
import type { GatewayMiddleware } from './state.js';

const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/;

/** Accepts a well-formed X-Request-Id or makes one, and echoes it on the response. */
export function requestId(): GatewayMiddleware {
  return async function assignRequestId(ctx, next) {
    const offered = ctx.get('x-request-id');
    const id = WELL_FORMED.test(offered) ? offered : randomUUID();
    ctx.state.requestId = id;
    ctx.set('X-Request-Id', id);
    await next();
  };
}
