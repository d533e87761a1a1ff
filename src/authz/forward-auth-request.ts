import type { IncomingMessage } from 'node:http';
import { requireNormalPath } from '../core/path.js';
import { DomainError } from '../core/domain-error.js';
import { isValidHost } from '../core/headers.js';

/** The request a forward-auth call asks about, as the proxy in front described it. */
export interface DescribedRequest {
  method: string;
  /** The path as described, which is in normal form (see requireNormalPath). */
  path: string;
  /** The query string without `?` (may be empty). */
  querystring: string;
  /** X-Forwarded-Host, when well-formed. */
  host: string | undefined;
  /** X-Forwarded-Proto (http or https; any other is refused), lower case. */
  proto: 'http' | 'https' | undefined;
}

/** The method and URI a forward-auth call names, read before they are judged (for the access line). */
export interface Description {
  method: string;
  target: string;
}

/** A method token (RFC 9110 section 9.1). */
const METHOD = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/;
/** An origin-form target: visible ASCII only, starting with /. */
const TARGET = /^\/[\x21-\x7e]*$/;
const MAX_TARGET = 8192;

/**
 * Reads the original request from a forward-auth call: method and URI from X-Forwarded-Method and
 * X-Forwarded-Uri (Traefik, Caddy) or X-Original-Method and X-Original-URI (nginx's auth_request, as
 * configured in docs/authorization.md), host and scheme from X-Forwarded-Host and X-Forwarded-Proto.
 *
 * Proxies pass the client's own headers on to the auth call, so a client can add the pair its proxy
 * does not set. When both pairs are present they must describe the same request, or the call is
 * refused: otherwise a client could have `/public` judged while its proxy serves `/admin`. A method
 * is required (nginx's subrequest is always GET, so its own method says nothing); every header at
 * most once. Refusals are domain errors, answered 400 (`invalid_request`, or `invalid_path` for a path the gateway
 * would refuse itself).
 */
export function readDescription(req: IncomingMessage): Description {
  const raw = req.rawHeaders;
  const method = agreed(raw, 'x-forwarded-method', 'x-original-method');
  const target = agreed(raw, 'x-forwarded-uri', 'x-original-uri');
  if (target === undefined) {
    throw new DomainError('invalid_request', 'a forward-auth request must say which request it asks about: X-Forwarded-Uri or X-Original-URI');
  }
  if (method === undefined) {
    throw new DomainError('invalid_request', 'a forward-auth request must name the original method: X-Forwarded-Method or X-Original-Method');
  }
  if (!METHOD.test(method)) throw new DomainError('invalid_request', 'the original method is not a method name');
  if (target.length > MAX_TARGET || !TARGET.test(target)) {
    throw new DomainError('invalid_path', 'the original URI must be a path (and query) starting with /');
  }
  return { method: method.toUpperCase(), target };
}

/** The path part of a described URI (everything before the first `?`), as written. */
export function describedPath(target: string): string {
  const q = target.indexOf('?');
  return q < 0 ? target : target.slice(0, q);
}

/**
 * The request a forward-auth call describes (readDescription), judged. The proxy in front forwards the
 * URI as the client wrote it, and the upstream reads that spelling its own way, so only a URI already in
 * normal form is judged: dot segments (`..`, `%2e%2e`), a `#` anywhere, backslashes, repeated slashes,
 * encoded slashes and escapes of unreserved characters are refused with 400 `invalid_path` rather than
 * resolved (`/admin/x/../../items` would be judged as `/items` while the upstream serves the admin's
 * page). A scheme other than http or https is refused (400 `invalid_request`); a malformed host is
 * left out (not shown on the access line).
 */
export function describedRequest(req: IncomingMessage, read: Description = readDescription(req)): DescribedRequest {
  const { method, target } = read;
  if (target.includes('#')) throw new DomainError('invalid_path', 'the original URI contains # (a fragment is never part of a request)');
  const path = requireNormalPath(describedPath(target));
  const q = target.indexOf('?');
  const raw = req.rawHeaders;
  const host = single(raw, 'x-forwarded-host');
  const scheme = schemeOf(single(raw, 'x-forwarded-proto'));
  return {
    method,
    path,
    querystring: q < 0 ? '' : target.slice(q + 1),
    host: host !== undefined && isValidHost(host) ? host : undefined,
    proto: scheme,
  };
}

/** X-Forwarded-Proto (schemes are case-insensitive): http, https or absent; anything else is refused. */
function schemeOf(value: string | undefined): 'http' | 'https' | undefined {
  const scheme = value?.toLowerCase();
  if (scheme === undefined || scheme === 'http' || scheme === 'https') return scheme;
  throw new DomainError('invalid_request', 'X-Forwarded-Proto must be http or https');
}

/** The value of whichever of the two headers is present; both present must agree. */
function agreed(raw: string[], a: string, b: string): string | undefined {
  const first = single(raw, a);
  const second = single(raw, b);
  if (first !== undefined && second !== undefined && first !== second) {
    throw new DomainError('invalid_request', `${a} and ${b} describe different requests`);
  }
  return first ?? second;
}

/** A header's one value (trimmed; empty counts as absent); sent more than once: 400. */
function single(raw: string[], name: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length !== name.length || raw[i]!.toLowerCase() !== name) continue;
    if (value !== undefined) throw new DomainError('invalid_request', `the request carries more than one ${name} header`);
    value = raw[i + 1]!.trim();
  }
  return value === '' ? undefined : value;
}
