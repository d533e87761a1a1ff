/**
 * Why the domain (tokens, credentials, the stores, the upstream pools) refused something, in its own
 * words: no HTTP status, no header. The HTTP layer's one table (`src/http/errors.ts`) turns a code into
 * the status, problem code, challenge and `Retry-After` a client sees, so the same refusal reads the
 * same on every path (a proxied request, a token endpoint, a handshake, a forward-auth answer).
 */
export type DomainCode =
  /** A user name and password that do not match. */
  | 'invalid_credentials'
  /** An access token that is malformed, forged, revoked or of changed credentials (the detail says which). */
  | 'invalid_token'
  /** An access token past its `exp`. */
  | 'token_expired'
  /** A refresh token that is invalid, expired, revoked or already used. */
  | 'invalid_refresh_token'
  /** Too many failed sign-ins (of a user, an address or a pair), or too many waiting at once from one address. */
  | 'too_many_attempts'
  /** The bounded queue of password checks is full. */
  | 'verifications_busy'
  /** Every target of an upstream has as many requests as it may take. */
  | 'upstream_busy'
  /** The session store did not answer. */
  | 'store_unavailable'
  /** The user directory (LDAP) cannot answer for a password it has not verified lately. */
  | 'directory_unavailable';

export class DomainError extends Error {
  readonly code: DomainCode;
  /** When the caller may try again, in seconds (a throttle, a full queue, an outage). */
  readonly retryAfterSeconds: number | undefined;
  /**
   * The challenge of the identity source whose credentials were refused (its WWW-Authenticate), set by
   * the authenticate step; the table decides whether the code's answer carries it.
   */
  challenge: string | undefined;

  constructor(code: DomainCode, detail: string, options: { retryAfterSeconds?: number; cause?: unknown } = {}) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DomainError';
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.challenge = undefined;
  }
}
