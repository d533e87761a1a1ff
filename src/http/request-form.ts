import { isValidHost } from '../proxy/headers.js';
import { normalizePath } from './path.js';
import { HttpProblem } from './problem.js';
import type { GatewayMiddleware } from './state.js';

/** Methods the gateway never forwards: TRACE reflects headers (credentials included), CONNECT opens tunnels. */
const REFUSED_METHODS = new Set(['TRACE', 'CONNECT']);
const ALLOW = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

/**
 * The request line and Host, checked once before anything else looks at the request: an origin-form
 * target, a method the gateway forwards, exactly one well-formed Host (RFC 9112 section 3.2), and the
 * one normalized spelling of the path, which every later step (token routes, routing, forwarding) sees.
 */
export function requestForm(): GatewayMiddleware {
  // Not async: the checks are synchronous, and a throw here is turned into a rejection by the chain.
  return function checkRequestForm(ctx, next) {
    const req = ctx.req;
    if (REFUSED_METHODS.has(req.method!)) {
      throw new HttpProblem(405, 'method_not_allowed', `${req.method} is not served by the gateway`, { headers: { Allow: ALLOW } });
    }
    // Only origin-form targets (`/path?query`): Koa cannot even parse some absolute-form ones.
    if (!req.url?.startsWith('/')) throw new HttpProblem(400, 'invalid_path', 'the request target must be a path starting with /');
    checkHost(req.rawHeaders, req.headers.host, req.httpVersionMajor === 1 && req.httpVersionMinor === 0);
    const path = ctx.path;
    const normalized = normalizePath(path);
    if (normalized !== path) ctx.path = normalized;
    return next();
  };
}

function checkHost(raw: string[], host: string | undefined, http10: boolean): void {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') count++;
  if (count > 1) throw new HttpProblem(400, 'invalid_request', 'the request carries more than one Host header');
  if (host === undefined) {
    if (!http10) throw new HttpProblem(400, 'invalid_request', 'an HTTP/1.1 request needs a Host header');
    return;
  }
  if (!isValidHost(host)) throw new HttpProblem(400, 'invalid_request', 'the Host header is not a valid host[:port]');
}

/** `/v1/tokens` as its own segment, in any case, each of the two segments with optional `;` parameters (also `%3B`). */
const TOKEN_PATH = /^\/v1(?:(?:;|%3b)[^/]*)?\/tokens(?:(?:;|%3b)[^/]*)?(?:\/|$)/i;

/**
 * Whether a (normalized) path is `/v1/tokens` or below it however it is spelled: in any case, and with
 * `;` parameters (also percent-encoded) on a segment. Such a path is answered by the gateway or
 * refused, never forwarded, whatever the routes.
 */
export function isTokenPath(path: string): boolean {
  return TOKEN_PATH.test(path);
}
