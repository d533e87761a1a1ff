import type { Logger } from '../log.js';
import { accessLine } from './access-log.js';
import { assignRequestId } from './request-id.js';
import type { GatewayContext, GatewayMiddleware } from './state.js';

export interface Observers {
  /** Counts a finished request in the metrics (`started`: performance.now() at its start). */
  count(ctx: GatewayContext, started: number): void;
  log: Logger;
  /** Whether the access log is on (it can change with a reload). */
  accessLog(): boolean;
}

/**
 * The frame of every request: its id as it arrives; once it is answered, its count in the metrics and
 * its access line. One middleware rather than three, since each is a before-and-after around the same
 * request, and every layer of the chain costs each request a promise.
 */
export function observe(observers: Observers): GatewayMiddleware {
  const line = accessLine(observers.log);
  return async function observeRequest(ctx, next) {
    assignRequestId(ctx);
    const started = performance.now();
    const finishLine = observers.accessLog() ? line(ctx, started) : undefined;
    try {
      await next();
    } finally {
      observers.count(ctx, started);
      finishLine?.();
    }
  };
}
