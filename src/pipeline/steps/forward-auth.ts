import type { ForwardAuthConfig } from '../../config/types.js';
import { HttpProblem } from '../../core/problem.js';
import type { GatewayExchange } from '../../http/state.js';
import type { Assertions } from '../../identity/identity-headers.js';
import { identityHeaders } from '../../identity/identity-headers.js';
import { addressMatcher } from '../../core/addresses.js';
import { describedPath, describedRequest, readDescription } from '../../authz/forward-auth-request.js';

/**
 * The forward-auth entry of a configuration: with `trustedProxies`, a caller whose TCP peer address is
 * not listed gets 403 before anything of its request is read (X-Forwarded-For is the client's word,
 * not the caller's); then asForwardAuthCall.
 */
export function forwardAuthEntry(config: ForwardAuthConfig): (ex: GatewayExchange) => void {
  if (config.trustedProxies === undefined) return asForwardAuthCall;
  const trusted = addressMatcher(config.trustedProxies);
  return function trustedForwardAuthCall(ex) {
    if (!trusted(ex.req.socket.remoteAddress)) {
      throw new HttpProblem(403, 'forbidden', 'this address may not ask the forward-auth endpoint (forwardAuth.trustedProxies)');
    }
    asForwardAuthCall(ex);
  };
}

/**
 * For the own-endpoint lookup: a request to exactly the forward-auth path becomes the request it
 * describes (method, path and query from X-Forwarded-* / X-Original-*, see describedRequest) and runs
 * the pipeline to the `answer` hand-off. Every later step (authenticate, route, allow, rate limit,
 * the paging parameters' names) judges the described request as it would judge that request sent to
 * the gateway itself; credentials and the client address are the forward-auth request's own. The
 * access line names the described method and path as written, also when the description is refused.
 */
export function asForwardAuthCall(ex: GatewayExchange): void {
  ex.handOff = 'answer';
  const state: NonNullable<GatewayExchange['forwardAuth']> = { path: ex.path, host: undefined, proto: undefined, described: undefined };
  ex.forwardAuth = state;
  const read = readDescription(ex.req);
  ex.method = read.method;
  state.described = describedPath(read.target);
  const described = describedRequest(ex.req, read);
  state.host = described.host;
  state.proto = described.proto;
  ex.path = described.path;
  ex.query = described.querystring;
}

/**
 * The `answer` hand-off: 200 with an empty body and the identity headers (user, via, groups, and the
 * assertion when configured), never cached. The proxy in front copies them onto the request it sends
 * on. Refusals never get here: the steps threw (401 with WWW-Authenticate, 403, 429 with Retry-After).
 * Paging values are not checked (the gateway cannot rewrite a request another proxy forwards); the
 * paging step refuses the parameters' name variants (`size[]`, `SIZE`) on paged routes.
 */
export function answerForwardAuth(signed: Assertions | undefined): (ex: GatewayExchange) => void {
  return function answer(ex) {
    const res = ex.res;
    ex.stampId();
    const identity = identityHeaders(ex.principal!, ex.route!.audience, signed, ex.certificate);
    for (const name in identity) res.setHeader(name, identity[name]!);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    res.setHeader('Content-Length', '0');
    res.statusCode = 200;
    res.end();
  };
}
