import type { HttpProblem } from '../../src/http/problem.js';
import { toProblem } from '../../src/http/errors.js';

/**
 * The answer a client gets for what `fn` throws, made as the error handler makes it: a domain refusal
 * (a path, paging, a forward-auth description, an authenticator's) through the HTTP layer's one table
 * (DOMAIN_ANSWERS). Undefined when `fn` throws nothing; an error that is neither a DomainError nor an
 * HttpProblem reads as the 500 `internal_error` it would be.
 */
export function refusalOf(fn: () => unknown): HttpProblem | undefined {
  try {
    fn();
  } catch (err) {
    return toProblem(err);
  }
  return undefined;
}

/** The same for a rejection: the answer a client gets for what `work` rejects with; undefined when it resolves. */
export async function rejectionOf(work: unknown): Promise<HttpProblem | undefined> {
  try {
    await (typeof work === 'function' ? work() : work);
  } catch (err) {
    return toProblem(err);
  }
  return undefined;
}

