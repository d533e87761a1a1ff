import type { Exchange } from '../core/exchange.js';
import type { Logger } from '../log.js';
import { accessLine } from './access-log.js';
import { answerError } from './errors.js';

export interface Observers {
  /** Counts a finished request in the metrics. */
  count(ex: Exchange): void;
  log: Logger;
  /** Whether the access log is on (it can change with a reload). */
  accessLog(): boolean;
}

/**
 * The frame of every request: `handle` (the runtime: request form, then an own endpoint or the
 * pipeline) runs on the request's exchange; anything it throws is answered as a problem body; once it
 * is done, the request is counted in the metrics and gets its access line. A handle that finished
 * without waiting is finished here at once, without a promise.
 */
export function observe(observers: Observers, handle: (ex: Exchange) => void | Promise<void>): (ex: Exchange) => void {
  const line = accessLine(observers.log);
  const log = observers.log;
  const end = (ex: Exchange) => {
    observers.count(ex);
    if (observers.accessLog()) line(ex);
  };
  return function serveRequest(ex) {
    // An HTTP/2 stream shares its connection's byte count with the others: its response counts its own body.
    if (observers.accessLog() && ex.req.httpVersionMajor < 2) ex.bytesBefore = ex.req.socket.bytesWritten;
    let pending: void | Promise<void> = undefined;
    try {
      pending = handle(ex);
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
