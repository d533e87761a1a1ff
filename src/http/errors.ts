import { DomainError, type DomainCode } from '../core/domain-error.js';
import type { Logger } from '../log.js';
import { REALM } from '../auth/authenticator.js';
import { HttpProblem, internalError, writeProblem, type ProblemCode } from './problem.js';
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
  ex.stampId();
  writeProblem(res, problem);
}

interface DomainAnswer {
  status: number;
  code: ProblemCode;
  /** The WWW-Authenticate of the answer; undefined: none. */
  challenge?: (err: DomainError) => string | readonly string[] | undefined;
  /** The detail the client reads, when not the error's own message. */
  detail?: string;
}

/** A 401 for a credential: the challenge of the identity source that refused it (none on the token endpoints). */
const sourceChallenge = (err: DomainError) => err.challenge;
const bearerError = (description: string) => `Bearer realm="${REALM}", error="invalid_token", error_description="${description}"`;
/** A provider's token refused (RFC 6750 §3.1), without the detail: the detail names the provider's rules. */
const providerTokenError = `Bearer realm="${REALM}", error="invalid_token"`;

/**
 * The one table from a domain refusal to what the client sees: status, problem code, challenge and
 * detail. `Retry-After` comes from the error itself (a lockout knows how long it holds), and the
 * error's details become members of the problem body.
 */
export const DOMAIN_ANSWERS: { readonly [C in DomainCode]: DomainAnswer } = {
  // No credentials: every source's challenge (the authenticate step names them).
  missing_credentials: { status: 401, code: 'missing_credentials', challenge: sourceChallenge },
  invalid_credentials: { status: 401, code: 'invalid_credentials', challenge: sourceChallenge },
  credentials_not_accepted: { status: 401, code: 'invalid_credentials', challenge: sourceChallenge },
  // RFC 6750 §3.1: a bearer token refused says why in its challenge.
  invalid_token: { status: 401, code: 'invalid_token', challenge: (err) => bearerError(err.message) },
  token_expired: { status: 401, code: 'token_expired', challenge: () => bearerError('the access token has expired') },
  malformed_bearer: { status: 401, code: 'invalid_token', challenge: () => `Bearer realm="${REALM}", error="invalid_request"` },
  invalid_provider_token: { status: 401, code: 'invalid_token', challenge: () => providerTokenError },
  provider_token_expired: { status: 401, code: 'token_expired', challenge: () => `${providerTokenError}, error_description="expired"` },
  // A browser session: the browser sent its cookie by itself, a challenge would only open a password prompt.
  session_ended: { status: 401, code: 'invalid_token' },
  session_expired: { status: 401, code: 'token_expired' },
  invalid_refresh_token: { status: 401, code: 'invalid_refresh_token' },
  too_many_attempts: { status: 429, code: 'too_many_attempts' },
  invalid_request: { status: 400, code: 'invalid_request' },
  invalid_path: { status: 400, code: 'invalid_path' },
  invalid_page_size: { status: 400, code: 'invalid_page_size' },
  invalid_page: { status: 400, code: 'invalid_page' },
  invalid_sort: { status: 400, code: 'invalid_sort' },
  not_found: { status: 404, code: 'not_found' },
  forbidden: { status: 403, code: 'forbidden' },
  identity_provider_unavailable: { status: 503, code: 'identity_provider_unavailable' },
  provider_answer_unusable: { status: 502, code: 'bad_gateway' },
  verifications_busy: { status: 503, code: 'service_unavailable' },
  upstream_busy: { status: 503, code: 'service_unavailable' },
  store_unavailable: { status: 503, code: 'store_unavailable', detail: 'the token store is unavailable; retry shortly' },
  directory_unavailable: { status: 503, code: 'directory_unavailable' },
};

/** The problem a domain refusal is answered with. */
function domainProblem(err: DomainError): HttpProblem {
  const answer = DOMAIN_ANSWERS[err.code];
  const headers: Record<string, string | string[]> = {};
  const challenge = answer.challenge?.(err);
  if (challenge !== undefined) headers['WWW-Authenticate'] = challenge as string | string[];
  if (err.retryAfterSeconds !== undefined) headers['Retry-After'] = String(err.retryAfterSeconds);
  return new HttpProblem(answer.status, answer.code, answer.detail ?? err.message, { headers, extensions: err.details });
}

/** Maps any error to the HttpProblem the client sees. */
export function toProblem(err: unknown): HttpProblem {
  if (err instanceof HttpProblem) return err;
  if (err instanceof DomainError) return domainProblem(err);
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
