import type { ForwardAuthConfig } from '../../config/types.js';
import { HttpProblem } from '../../http/problem.js';
import type { GatewayExchange } from '../../http/state.js';
import type { Assertions } from '../../identity/identity-headers.js';
import { identityHeaders } from '../../identity/identity-headers.js';
import { addressMatcher } from '../../core/addresses.js';
import { describedPath, describedRequest, readDescription } from '../../authz/forward-auth-request.js';
import type { ForwardAuthState } from '../../core/exchange.js';
import { answeredToAProxy } from '../../core/grpc.js';
import { withoutCookies } from '../../auth/seal.js';
import type { OwnHandler } from '../../http/cors.js';
import { REFUSAL_HEADER, RELAY_REQUEST_HEADER } from '../refusal-relay.js';

/**
 * The forward-auth entry of a configuration, for the own-endpoint lookup: with `trustedProxies`, a caller
 * whose TCP peer address is not listed gets 403 before anything of its request is read (X-Forwarded-For
 * is the client's word, not the caller's). Then a call carrying a sealed refusal (`X-Gateway-Refusal`,
 * the nginx recipe's second ask) is answered by `replay`; any other becomes the request it describes
 * (asForwardAuthCall) and takes the pipeline.
 */
export function forwardAuthEntry(config: ForwardAuthConfig, replay: OwnHandler): (ex: GatewayExchange) => OwnHandler | undefined {
  const trusted = config.trustedProxies === undefined ? undefined : addressMatcher(config.trustedProxies);
  return function enterForwardAuth(ex) {
    // Whatever content type the client's headers carry, the answer is for the proxy: never a gRPC form.
    answeredToAProxy(ex.req);
    if (trusted && !trusted(ex.req.socket.remoteAddress)) {
      throw new HttpProblem(403, 'forbidden', 'this address may not ask the forward-auth endpoint (forwardAuth.trustedProxies)');
    }
    if (ex.req.headers[REFUSAL_HEADER] !== undefined) return replay;
    asForwardAuthCall(ex);
    return undefined;
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
function asForwardAuthCall(ex: GatewayExchange): void {
  ex.handOff = 'answer';
  const relay = ex.req.headers[RELAY_REQUEST_HEADER]?.toString().trim().toLowerCase() === 'refusals';
  const state: ForwardAuthState = { path: ex.path, host: undefined, proto: undefined, described: undefined, relay, relayed: undefined };
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
 * The `answer` hand-off: 200 with an empty body, never cached, and the request headers the upstream is to
 * get, which the proxy in front copies onto the request it sends on:
 * - the identity headers (user, via, groups, and the assertion when configured; groups always, empty when
 *   none, so a proxy that copies it overwrites any client-sent copy);
 * - `X-Gateway-Upstream`: the name of the route's upstream (a recipe's proxy sends the request there and
 *   nowhere else, so the route judged is the route served);
 * - `Cookie`: the client's cookies without the gateway's own (the sign-in session and state), empty when
 *   none is left; on a route with forwardAuthorization, as sent.
 * Refusals never get here: the steps threw (401 with WWW-Authenticate, 403, 429 with Retry-After).
 * Paging values are not checked (the gateway cannot rewrite a request another proxy forwards); the
 * paging step refuses the parameters' name variants (`size[]`, `SIZE`) on paged routes.
 */
export function answerForwardAuth(signed: Assertions | undefined, ownCookies?: (name: string) => boolean): (ex: GatewayExchange) => void {
  return function answer(ex) {
    const res = ex.res;
    const route = ex.route!;
    ex.stampId();
    const identity = identityHeaders(ex.principal!, route.audience, signed, ex.certificate);
    for (const name in identity) res.setHeader(name, identity[name]!);
    if (route.upstream !== undefined) res.setHeader('X-Gateway-Upstream', route.upstream);
    const cookie = ex.req.headers.cookie;
    res.setHeader('Cookie', cookie === undefined ? '' : ownCookies && !route.forwardAuthorization ? withoutCookies(cookie, ownCookies) ?? '' : cookie);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    res.setHeader('Content-Length', '0');
    res.statusCode = 200;
    res.end();
  };
}
