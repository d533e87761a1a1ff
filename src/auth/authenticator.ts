import type { IncomingMessage } from 'node:http';
import type { Exchange } from '../core/exchange.js';
import type { Principal } from '../core/principal.js';

/** The realm named in every WWW-Authenticate challenge of the gateway's identity sources. */
export const REALM = 'auth-gateway';

/**
 * One source of identities: it recognises its credentials on a request and proves them. The
 * authenticate step does not ask every enabled authenticator in turn: it looks the request's credentials
 * up by where they are and their shape (a header of a source's own, the Authorization scheme, for a
 * scheme several sources share the credential's form, then the sources without a scheme), and asks
 * only the source they name (src/auth/authenticate.ts). Adding a source is a new authenticator (and its
 * configuration), nothing else: docs/pipeline-extension.md.
 */
export interface Authenticator<C = unknown> {
  /** The `via` of the principals it makes: headers, logs and metrics name the source by it. */
  readonly via: string;
  /**
   * The `Authorization` scheme it answers to (lower case), or undefined for credentials carried
   * elsewhere (another header, a cookie, the connection). A source without one, `header` or `form` is
   * asked about every request no other source decided, after those, in list order: its `parse` is its
   * own presence check and must be cheap (a cookie's, the connection's certificate).
   */
  readonly scheme: string | undefined;
  /**
   * A request header of its own that carries its credentials (lower case): a request that has it is
   * asked of this source first, before any Authorization. Its credentials may come elsewhere too (`form`).
   */
  readonly header?: string;
  /**
   * For a source that shares an Authorization scheme with others (Bearer: the gateway's own tokens, a
   * provider's, API keys): the form that tells its credentials from theirs. A source of a scheme without
   * one takes every credential of that scheme no other source's form or `knows` claims.
   */
  readonly form?: CredentialForm;
  /**
   * Whether it took this exact credential (what follows `<scheme> ` in Authorization) before and still
   * keeps it: a lookup in a cache of credentials it verified, nothing decoded. Such a credential is its
   * own (of no other source's form): the authenticate step asks it alone.
   */
  knows?(credentials: string): boolean;
  /**
   * Its credentials are the connection's (a client certificate), not the request's: it is not asked
   * about a forward-auth question, whose connection is the asking proxy's.
   */
  readonly fromConnection?: boolean;
  /** The WWW-Authenticate challenge of a 401 for its credentials (undefined: none). */
  readonly challenge: string | undefined;
  /**
   * How its credentials are described in the OpenAPI document (`/openapi.json` lists the scheme of every
   * authenticator that is on): the scheme's name there and its OpenAPI 3.1 Security Scheme Object.
   */
  readonly securityScheme: SecurityScheme;
  /**
   * Its credentials on the request, or undefined when the request carries none of its kind. Throws a
   * DomainError (`credentials_not_accepted`, `malformed_bearer`, …) for credentials of its kind that are
   * malformed. `credentials`:
   * for a scheme several sources share, in the common spelling (`<scheme> <credentials>`), what follows
   * `<scheme> ` as the authenticate step read it: the very string its form was looked up with, whose
   * hash a cache lookup already made (a token is hashed once per request, not once per look).
   */
  parse(req: IncomingMessage, credentials?: string): C | undefined;
  /**
   * Proves them: the principal, synchronously when nothing must be waited for (a cache hit), else a
   * promise of it. Throws (or rejects with) a DomainError saying why (the HTTP layer's DOMAIN_ANSWERS
   * gives it its status and challenge), a store outage included.
   */
  verify(credentials: C, ex: Exchange): Principal | Promise<Principal>;
  /**
   * Checks a principal it made again, later (an open WebSocket tunnel, periodically): undefined while
   * it holds, else why it no longer does. A store that cannot answer is no reason: the check holds.
   */
  recheck(owner: Principal): string | undefined | Promise<string | undefined>;
}

/**
 * What tells a source's credentials of a shared Authorization scheme from another source's, read by the
 * authenticate step from the credential (what follows `<scheme> `) before any `parse`. It is a condition
 * the source's `parse` holds too: a credential not of this form is not its own (parse gives undefined),
 * and no other source's form overlaps it. A credential of no source's form goes to the scheme's source
 * without one (the gateway's own tokens); so does one the source of its form declines.
 */
interface CredentialForm {
  /** The scheme its form is of, when not the source's own `scheme` (an API key sent as `Bearer agk_…`). */
  readonly scheme?: string;
  /** Its credentials start with this (an API key's `<prefix>_`). */
  readonly prefix?: string;
  /** Its credentials are compact JWS whose (unverified) `iss` is one of these (a provider's tokens). */
  readonly issuers?: readonly string[];
}

/** An OpenAPI 3.1 Security Scheme Object under the name the document gives it. */
export interface SecurityScheme {
  name: string;
  scheme: Readonly<Record<string, unknown>>;
}

/**
 * Whether an Authorization header names `scheme` (lower case) as its first word, in any case. The
 * common spellings (`Basic x`, `basic x`) are matched without allocating.
 */
export function schemeMatcher(scheme: string): (header: string) => boolean {
  const n = scheme.length;
  const capitalised = scheme[0]!.toUpperCase() + scheme.slice(1);
  return (header) => {
    if (header.length > n && header.charCodeAt(n) === 0x20 && (header.startsWith(capitalised) || header.startsWith(scheme))) return true;
    // Any other spelling: the first word (after leading whitespace, up to a space or tab), in any case.
    // A word of another length is another scheme, known without splitting or lower-casing anything.
    const t = header.trimStart();
    if (t.length < n) return false;
    if (t.length > n) {
      const after = t.charCodeAt(n);
      if (after !== 0x20 && after !== 0x09) return false;
    }
    return t.slice(0, n).toLowerCase() === scheme;
  };
}
