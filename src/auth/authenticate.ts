import { DomainError } from '../core/domain-error.js';
import type { Exchange } from '../core/exchange.js';
import type { Principal } from '../core/principal.js';
import type { Authenticator } from './authenticator.js';

/**
 * The authenticate step: the first of the enabled authenticators that recognises the request's
 * credentials proves them once and sets `ex.principal`. Synchronous when the authenticator answers
 * synchronously (cache hits). A request without credentials is refused `missing_credentials` with every
 * challenge; an Authorization scheme none of them answers to, `credentials_not_accepted` (with every challenge too).
 */
export function authenticate(authenticators: readonly Authenticator[]): (ex: Exchange) => void | Promise<void> {
  // Two sources may share a scheme (provider bearer tokens beside the gateway's own): each is named once.
  const challenges = [...new Set(authenticators.flatMap((a) => (a.challenge === undefined ? [] : [a.challenge])))];
  const schemes = [...new Set(authenticators.flatMap((a) => (a.scheme === undefined ? [] : [a.scheme[0]!.toUpperCase() + a.scheme.slice(1)])))];
  return function authenticateRequest(ex) {
    const req = ex.req;
    if (ex.repeatedAuthorization) throw new DomainError('invalid_request', 'the request carries more than one Authorization header');
    for (const authenticator of authenticators) {
      if (authenticator.fromConnection && ex.forwardAuth !== undefined) continue;
      const credentials = authenticator.parse(req);
      if (credentials === undefined) continue;
      let verified: Principal | Promise<Principal>;
      try {
        verified = authenticator.verify(credentials, ex);
      } catch (err) {
        throw challenged(err, authenticator);
      }
      if (!(verified instanceof Promise)) {
        ex.principal = verified;
        return undefined;
      }
      return verified.then((principal) => {
        ex.principal = principal;
      }, (err: unknown) => {
        throw challenged(err, authenticator);
      });
    }
    if (req.headers.authorization === undefined) {
      throw new DomainError('missing_credentials', `credentials are required: Authorization: ${schemes.join(' or ')}`, { challenge: challenges });
    }
    throw new DomainError('credentials_not_accepted', `the Authorization scheme must be ${schemes.join(' or ')}`, { challenge: challenges });
  };
}

/** A refusal from an authenticator carries its challenge (the table decides whether the answer shows it). */
function challenged(err: unknown, authenticator: Authenticator): unknown {
  if (err instanceof DomainError) err.challenge ??= authenticator.challenge;
  return err;
}
