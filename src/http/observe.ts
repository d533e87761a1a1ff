import type { Exchange, ExchangeTracer } from '../core/exchange.js';
import type { Logger } from '../log.js';
import { accessLine } from './access-log.js';
import { answerError } from './errors.js';

/**
 * The status of a request whose client left before any answer went out (nginx's "client closed
 * request"): no status was sent, and the one set on the response (Koa's default 404, or an answer
 * written into a closed connection or a reset HTTP/2 stream) is not what the client got.
 */
const CLIENT_CLOSED = 499;

export interface Observers {
  /** Counts a finished request in the metrics. */
  count(ex: Exchange): void;
  log: Logger;
  /** Whether the access log is on (it can change with a reload). */
  accessLog(): boolean;
  /** Starts each request's trace, once tracing is on and loaded; undefined: off (no span, no context, no cost). */
  tracer?: ExchangeTracer | undefined;
}

/**
 * The frame of every request: `handle` (the runtime: request form, then an own endpoint or the
 * pipeline) runs on the request's exchange (in its trace's context, with tracing on); anything it throws
 * is answered as a problem body; once it is done, the request is counted in the metrics, its trace's
 * span ends, and it gets its access line. A handle that finished
 * without waiting is finished here at once, without a promise.
 */
export function observe(observers: Observers, handle: (ex: Exchange) => void | Promise<void>): (ex: Exchange) => void {
  const line = accessLine(observers.log);
  const log = observers.log;
  const end = (ex: Exchange) => {
    if (leftUnanswered(ex)) {
      ex.res.statusCode = CLIENT_CLOSED;
      ex.cut ??= 'client_closed';
    }
    observers.count(ex);
    ex.trace?.end(ex);
    if (observers.accessLog()) line(ex);
  };
  return function serveRequest(ex) {
    // An HTTP/2 stream shares its connection's byte count with the others: its response counts its own body.
    if (observers.accessLog() && ex.req.httpVersionMajor < 2) ex.bytesBefore = ex.req.socket.bytesWritten;
    let pending: void | Promise<void> = undefined;
    const tracer = observers.tracer;
    try {
      if (tracer === undefined) {
        pending = handle(ex);
      } else {
        const trace = (ex.trace = tracer.start(ex));
        pending = trace.within(() => handle(ex));
      }
    } catch (err) {
      answerError(ex, err, log);
    }
    if (pending === undefined) {
      end(ex);
      return;
    }
    pending.then(() => end(ex), (err: unknown) => {
      answerError(ex, err, log);
      end(ex);
    });
  };
}

/** The connection (HTTP/1) or stream (HTTP/2) is gone and no head was sent on it. */
function leftUnanswered(ex: Exchange): boolean {
  return ex.res.destroyed && !ex.res.headersSent;
}
