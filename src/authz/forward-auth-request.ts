import type { IncomingMessage } from 'node:http';
import { normalizePath } from '../http/path.js';
import { HttpProblem } from '../http/problem.js';
import { isValidHost } from '../proxy/headers.js';

/** The request a forward-auth call asks about, as the proxy in front described it. */
export interface DescribedRequest {
  method: string;
  /** The normalized path (the same spelling rules as a request the gateway forwards itself). */
  path: string;
  /** The query string without `?` (may be empty). */
  querystring: string;
  /** X-Forwarded-Host, when well-formed. */
  host: string | undefined;
  /** X-Forwarded-Proto, when http or https. */
  proto: 'http' | 'https' | undefined;
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
 * most once. Refusals are 400 problems (`invalid_request`, or `invalid_path` for a path the gateway
 * would refuse itself).
 */
export function describedRequest(req: IncomingMessage): DescribedRequest {
  const raw = req.rawHeaders;
  const method = agreed(raw, 'x-forwarded-method', 'x-original-method');
  const target = agreed(raw, 'x-forwarded-uri', 'x-original-uri');
  if (target === undefined) {
    throw new HttpProblem(400, 'invalid_request', 'a forward-auth request must say which request it asks about: X-Forwarded-Uri or X-Original-URI');
  }
  if (method === undefined) {
    throw new HttpProblem(400, 'invalid_request', 'a forward-auth request must name the original method: X-Forwarded-Method or X-Original-Method');
  }
  if (!METHOD.test(method)) throw new HttpProblem(400, 'invalid_request', 'the original method is not a method name');
  if (target.length > MAX_TARGET || !TARGET.test(target)) {
    throw new HttpProblem(400, 'invalid_path', 'the original URI must be a path (and query) starting with /');
  }
  const q = target.indexOf('?');
  const path = normalizePath(q < 0 ? target : target.slice(0, q));
  const host = single(raw, 'x-forwarded-host');
  const proto = single(raw, 'x-forwarded-proto');
  return {
    method: method.toUpperCase(),
    path,
    querystring: q < 0 ? '' : target.slice(q + 1),
    host: host !== undefined && isValidHost(host) ? host : undefined,
    proto: proto === 'http' || proto === 'https' ? proto : undefined,
  };
}

/** The value of whichever of the two headers is present; both present must agree. */
function agreed(raw: string[], a: string, b: string): string | undefined {
  const first = single(raw, a);
  const second = single(raw, b);
  if (first !== undefined && second !== undefined && first !== second) {
    throw new HttpProblem(400, 'invalid_request', `${a} and ${b} describe different requests`);
  }
  return first ?? second;
}

/** A header's one value (trimmed; empty counts as absent); sent more than once: 400. */
function single(raw: string[], name: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length !== name.length || raw[i]!.toLowerCase() !== name) continue;
    if (value !== undefined) throw new HttpProblem(400, 'invalid_request', `the request carries more than one ${name} header`);
    value = raw[i + 1]!.trim();
  }
  return value === '' ? undefined : value;
}
