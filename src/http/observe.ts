import type { Logger } from '../log.js';
import { accessLine } from './access-log.js';
import { answerError } from './errors.js';
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
 * The frame of every request, and Koa's only middleware: its id as it arrives; then `handle` (the
 * runtime: request form, own endpoints or the pipeline); anything it throws answered as a problem body;
 * once it is answered, its count in the metrics and its access line. One function rather than a
 * middleware each, since each is a before-and-after around the same request, and every layer costs
 * each request a promise; a handler that finished without awaiting is not awaited.
 */
export function observe(observers: Observers, handle: (ctx: GatewayContext) => void | Promise<void>): GatewayMiddleware {
  const line = accessLine(observers.log);
  const log = observers.log;
  return async function serveRequest(ctx) {
    assignRequestId(ctx);
    const started = performance.now();
    const finishLine = observers.accessLog() ? line(ctx, started) : undefined;
    try {
      const pending = handle(ctx);
      if (pending !== undefined) await pending;
    } catch (err) {
      answerError(ctx, err, log);
    } finally {
      observers.count(ctx, started);
      finishLine?.();
    }
  };
}
