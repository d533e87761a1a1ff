import { DomainError } from '../core/domain-error.js';
import type { Exchange } from '../core/exchange.js';
import type { Principal } from '../core/principal.js';
import type { Authenticator } from './authenticator.js';

/** An authenticator's answer when the request carries none of its credentials (its parse gave undefined). */
const DECLINED = Symbol('declined');
type Outcome = undefined | Promise<void> | typeof DECLINED;

/** The sources of one Authorization scheme, and what tells their credentials apart by form. */
interface SchemeSources {
  /** Every source of the scheme, in list order: asked in turn for a spelling the forms are not read from. */
  readonly all: readonly Authenticator[];
  /** By the credential's prefix (an API key's `agk_`). */
  readonly prefixed: ReadonlyArray<readonly [string, Authenticator]>;
  /** Sources that may know the very credential (a cache of tokens each verified), in list order. */
  readonly knowing: readonly Authenticator[];
  /** By the (unverified) `iss` of a compact JWS (a provider's tokens). */
  readonly byIssuer: ReadonlyMap<string, Authenticator>;
  /** The sources without a form: every credential of the scheme no form claims, and those a source of its form declines. */
  readonly rest: readonly Authenticator[];
}

/**
 * The authenticate step: it looks up the one authenticator the request's credentials belong to and
 * asks only that one, which proves them once and sets `ex.principal`. Synchronous when the authenticator
 * answers synchronously (cache hits). Where credentials are decides, in this order:
 *
 * 1. a header of a source's own (`Authenticator.header`: an API key's `X-API-Key`);
 * 2. the Authorization scheme, read once: its one source, or for a scheme several share (Bearer) the
 *    credential's form: a source's prefix (`agk_…`), a source that verified this very token before
 *    (`knows`: the gateway's own tokens, a provider's), the `iss` of a JWS naming a provider, else the
 *    scheme's source without a form (the gateway's own tokens); the sources of a scheme are asked in list
 *    order only for a spelling whose credential cannot be read (a tab, leading spaces: each refuses it or
 *    takes it as before);
 * 3. the sources without a scheme, in list order, each by its own cheap presence check (its `parse`): a
 *    client certificate of the connection (not on a forward-auth question, whose connection is the
 *    asking proxy's), the session cookie.
 *
 * The answers are those of asking every source in list order (runtime.ts: API keys, Basic, provider
 * tokens, the gateway's tokens, client certificates, the session cookie), because each form is a
 * condition of its source's own `parse`. A request without credentials is refused `missing_credentials`
 * with every challenge; an Authorization scheme none of them answers to, `credentials_not_accepted` (with every challenge too).
 */
export function authenticate(authenticators: readonly Authenticator[]): (ex: Exchange) => void | Promise<void> {
  // Two sources may share a scheme (provider bearer tokens beside the gateway's own): each is named once.
  const challenges = [...new Set(authenticators.flatMap((a) => (a.challenge === undefined ? [] : [a.challenge])))];
  const schemes = [...new Set(authenticators.flatMap((a) => (a.scheme === undefined ? [] : [a.scheme[0]!.toUpperCase() + a.scheme.slice(1)])))];
  const headerSources = authenticators.filter((a) => a.header !== undefined);
  const bySchemes = schemeTable(authenticators);
  const others = authenticators.filter((a) => a.scheme === undefined && a.header === undefined && a.form === undefined);

  /** The sources of the Authorization header's scheme that its credentials name, asked until one takes them. */
  function byAuthorization(header: string, ex: Exchange): Outcome {
    let sources: SchemeSources | undefined;
    // What follows `<scheme> ` in the common spelling (no leading whitespace, one space), else undefined.
    let credentials: string | undefined;
    const first = header.charCodeAt(0);
    if (first > 0x20 && first < 0x7f) {
      let end = 1;
      while (end < header.length) {
        const c = header.charCodeAt(end);
        if (c === 0x20 || c === 0x09) break;
        end++;
      }
      sources = sourcesOf(header.slice(0, end));
      if (sources !== undefined && header.charCodeAt(end) === 0x20) credentials = header.slice(end + 1);
    } else {
      // Leading whitespace or another first character: the scheme is the first word all the same.
      const t = header.trimStart();
      const end = t.search(/[ \t]/);
      sources = sourcesOf(end < 0 ? t : t.slice(0, end));
    }
    if (sources === undefined) return DECLINED;
    const all = sources.all;
    if (all.length === 1) return attempt(all[0]!, ex);
    if (credentials === undefined) return walk(all, ex, undefined, undefined);
    const chosen = choose(sources, credentials);
    if (chosen === undefined) return walk(sources.rest, ex, undefined, credentials);
    const outcome = attempt(chosen, ex, credentials);
    return outcome === DECLINED ? walk(sources.rest, ex, chosen, credentials) : outcome;
  }

  function sourcesOf(word: string): SchemeSources | undefined {
    return bySchemes.get(word) ?? bySchemes.get(word.toLowerCase());
  }

  return function authenticateRequest(ex) {
    const req = ex.req;
    if (ex.repeatedAuthorization) throw new DomainError('invalid_request', 'the request carries more than one Authorization header');
    for (const source of headerSources) {
      if (req.headers[source.header!] === undefined) continue;
      const outcome = attempt(source, ex);
      if (outcome !== DECLINED) return outcome;
    }
    const authorization = req.headers.authorization;
    if (authorization !== undefined) {
      const outcome = byAuthorization(authorization, ex);
      if (outcome !== DECLINED) return outcome;
    }
    for (const source of others) {
      if (source.fromConnection && ex.forwardAuth !== undefined) continue;
      const outcome = attempt(source, ex);
      if (outcome !== DECLINED) return outcome;
    }
    if (authorization === undefined) {
      throw new DomainError('missing_credentials', `credentials are required: Authorization: ${schemes.join(' or ')}`, { challenge: challenges });
    }
    throw new DomainError('credentials_not_accepted', `the Authorization scheme must be ${schemes.join(' or ')}`, { challenge: challenges });
  };
}

/**
 * The sources of each Authorization scheme (a source's `form.scheme`, else its `scheme`), under the
 * scheme's lower-case and capitalised spellings (the common ones are found without lower-casing).
 */
function schemeTable(authenticators: readonly Authenticator[]): Map<string, SchemeSources> {
  const table = new Map<string, SchemeSources>();
  for (const a of authenticators) {
    if (a.form !== undefined && (a.form.scheme ?? a.scheme) === undefined) throw new Error(`authenticator ${a.via}: a form is of an Authorization scheme`);
  }
  const names = [...new Set(authenticators.flatMap((a) => {
    const scheme = a.form?.scheme ?? a.scheme;
    return scheme === undefined ? [] : [scheme]; // lower case, as Authenticator.scheme
  }))];
  for (const name of names) {
    const all = authenticators.filter((a) => (a.form?.scheme ?? a.scheme) === name);
    const prefixed: Array<readonly [string, Authenticator]> = [];
    const byIssuer = new Map<string, Authenticator>();
    for (const a of all) {
      const form = a.form;
      if (form === undefined) continue;
      if (form.prefix === undefined && form.issuers === undefined) {
        throw new Error(`authenticator ${a.via}: a form names a prefix or issuers`);
      }
      if (form.prefix !== undefined) prefixed.push([form.prefix, a]);
      for (const issuer of form.issuers ?? []) {
        if (byIssuer.has(issuer)) throw new Error(`authenticators ${byIssuer.get(issuer)!.via} and ${a.via} both take tokens of ${issuer}`);
        byIssuer.set(issuer, a);
      }
    }
    const sources: SchemeSources = { all, prefixed, knowing: all.filter((a) => a.knows !== undefined), byIssuer, rest: all.filter((a) => a.form === undefined) };
    table.set(name, sources);
    table.set(name[0]!.toUpperCase() + name.slice(1), sources);
  }
  return table;
}

/** The one source a credential of a shared scheme names by its form, or undefined: the sources without a form. */
function choose(sources: SchemeSources, credentials: string): Authenticator | undefined {
  for (const [prefix, source] of sources.prefixed) if (credentials.startsWith(prefix)) return source;
  for (const source of sources.knowing) if (source.knows!(credentials)) return source;
  if (sources.byIssuer.size > 0) {
    const iss = unverifiedIssuer(credentials);
    if (iss !== undefined) return sources.byIssuer.get(iss);
  }
  return undefined;
}

/**
 * The `iss` of a compact JWS's payload, read without checking anything (it only says which source to
 * ask; that source verifies the token), or undefined when the credential is no such JWS.
 */
export function unverifiedIssuer(token: string): string | undefined {
  const first = token.indexOf('.');
  const second = first < 0 ? -1 : token.indexOf('.', first + 1);
  if (second < 0) return undefined;
  try {
    const payload = JSON.parse(Buffer.from(token.slice(first + 1, second), 'base64url').toString('utf8')) as unknown;
    const iss = typeof payload === 'object' && payload !== null ? (payload as { iss?: unknown }).iss : undefined;
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}

/** Each of `sources` but `asked`, in turn, until one takes the request's credentials. */
function walk(sources: readonly Authenticator[], ex: Exchange, asked: Authenticator | undefined, credentials: string | undefined): Outcome {
  for (const source of sources) {
    if (source === asked) continue;
    const outcome = attempt(source, ex, credentials);
    if (outcome !== DECLINED) return outcome;
  }
  return DECLINED;
}

/**
 * Asks one source (with the Authorization credentials the step read, when it read them): DECLINED when the
 * request carries none of its credentials, else it proves them and sets the principal.
 */
function attempt(authenticator: Authenticator, ex: Exchange, read?: string): Outcome {
  const credentials = authenticator.parse(ex.req, read);
  if (credentials === undefined) return DECLINED;
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

/** A refusal from an authenticator carries its challenge (the table decides whether the answer shows it). */
function challenged(err: unknown, authenticator: Authenticator): unknown {
  if (err instanceof DomainError) err.challenge ??= authenticator.challenge;
  return err;
}
