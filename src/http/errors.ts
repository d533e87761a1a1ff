import { StoreUnavailableError } from '../tokens/store/types.js';
import type { Logger } from '../log.js';
import { HttpProblem, internalError, type ProblemCode } from '../core/problem.js';
import { writeProblem } from '../core/problem-writer.js';
import type { Exchange } from '../core/exchange.js';

/**
 * Answers a request whose handling threw: its problem body (the one writer of problem bodies, for Koa's
 * own endpoints, the pipeline and handshakes alike), or a cut once a response began.
 */
export function answerError(ex: Exchange, err: unknown, log: Logger): void {
  const problem = toProblem(err);
  if (problem.code === 'internal_error') {
    log.error('request failed', { requestId: ex.requestId, status: problem.status, error: describe(err) });
  } else if (problem.status >= 500) {
    // Expected failures (store down, overload) are logged once per outage where they arise, not per request.
    log.debug('request refused', { requestId: ex.requestId, status: problem.status, code: problem.code });
  }
  const res = ex.res;
  if (res.headersSent || res.writableEnded || (res.socket && !res.socket.writable)) {
    // Too late for a problem body (a proxied response already started), or nobody to read it: cut the stream.
    ex.req.socket.destroy();
    return;
  }
  ex.problem = problem.code;
  writeProblem(res, problem);
}

/** Maps any error to the HttpProblem the client sees. */
export function toProblem(err: unknown): HttpProblem {
  if (err instanceof HttpProblem) return err;
  if (err instanceof StoreUnavailableError) {
    return new HttpProblem(503, 'store_unavailable', 'the token store is unavailable; retry shortly', {
      headers: { 'Retry-After': '1' },
    });
  }
  const status = (err as { status?: unknown } | null)?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // Errors from Koa itself (ctx.throw, http-errors): keep their status, use our body.
    return new HttpProblem(status, codeForStatus(status), (err as Error).message);
  }
  return internalError();
}

function codeForStatus(status: number): ProblemCode {
  switch (status) {
    case 404: return 'not_found';
    case 405: return 'method_not_allowed';
    case 413: return 'payload_too_large';
    case 415: return 'unsupported_media_type';
    default: return 'invalid_request';
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message;
  return String(err);
}
