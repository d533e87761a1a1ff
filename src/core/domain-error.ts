/**
 * Why the domain (everything below the HTTP edge: the stores, tokens, credentials, the identity
 * sources and policies, paths and paging) refused something, in its own words: no HTTP status, no
 * header. The HTTP layer's one table (`src/http/errors.ts`) turns a code into the status, problem code,
 * challenge and `Retry-After` a client sees, so the same refusal reads the same on every path (a proxied
 * request, a token endpoint, a handshake, a forward-auth answer).
 */
export type DomainCode =
  /** No credentials on a request that needs them. */
  | 'missing_credentials'
  /** A user name and password that do not match. */
  | 'invalid_credentials'
  /**
   * Credentials no identity source takes: an Authorization scheme none answers to, a malformed Basic
   * header or API key, an unknown, revoked or expired API key, a client certificate not verified or
   * naming no usable user, a session cookie the gateway did not make.
   */
  | 'credentials_not_accepted'
  /** An access token that is malformed, forged, revoked or of changed credentials (the detail says which). */
  | 'invalid_token'
  /** An access token past its `exp`. */
  | 'token_expired'
  /** `Authorization: Bearer` with something that is not one token68. */
  | 'malformed_bearer'
  /** A token of an OpenID provider that its keys, its claims or the issuer's rules refuse. */
  | 'invalid_provider_token'
  /** A token of an OpenID provider past its `exp` (with the issuer's skew). */
  | 'provider_token_expired'
  /** A browser session that was signed out or revoked. */
  | 'session_ended'
  /** A browser session past its end. */
  | 'session_expired'
  /** A refresh token that is invalid, expired, revoked or already used. */
  | 'invalid_refresh_token'
  /** Too many failed sign-ins (of a user, an address or a pair), or too many waiting at once from one address. */
  | 'too_many_attempts'
  /** A request that cannot be read as asked: a header repeated or missing, two credentials at once, a sign-in out of order. */
  | 'invalid_request'
  /** A path the gateway does not judge: not in normal form, an encoded slash, a dot segment where none may be. */
  | 'invalid_path'
  /** A paging `size` that is not one of the list's sizes (or is given twice, or spelt otherwise). */
  | 'invalid_page_size'
  /** A paging `page` that is not a non-negative integer (or is given twice, or spelt otherwise). */
  | 'invalid_page'
  /** A paging `sort` of a property or direction the list does not sort by (or spelt otherwise). */
  | 'invalid_sort'
  /** What was asked for is not here (a sign-in at a provider where none is configured). */
  | 'not_found'
  /** The user is known and may not do this (a provider that did not sign the user in, a user name it gives that is unusable). */
  | 'forbidden'
  /** An OpenID provider cannot be reached, or none of its signing keys is known. */
  | 'identity_provider_unavailable'
  /** An OpenID provider answered with something the gateway cannot use (groups too many for a session cookie). */
  | 'provider_answer_unusable'
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
   * Facts the client may read beside the detail, as members of the answer's body: the sizes a paged
   * list allows, a specification's own error members (a back-channel logout's `error`).
   */
  readonly details: Readonly<Record<string, unknown>> | undefined;
  /**
   * The challenge of the identity source (or, with no credentials, of every source) whose credentials
   * were refused: its WWW-Authenticate, set by the source itself or by the authenticate step; the table
   * decides whether the code's answer carries it.
   */
  challenge: string | readonly string[] | undefined;

  constructor(
    code: DomainCode,
    detail: string,
    options: { retryAfterSeconds?: number; details?: Record<string, unknown>; challenge?: string | readonly string[]; cause?: unknown } = {},
  ) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DomainError';
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.details = options.details;
    this.challenge = options.challenge;
  }
}
