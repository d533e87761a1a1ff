import type { ForwardAuthConfig } from '../config/types.js';
import { HttpProblem } from '../http/problem.js';
import type { GatewayContext } from '../http/state.js';
import type { Assertions } from '../identity/identity-headers.js';
import { identityHeaders } from '../identity/identity-headers.js';
import { addressMatcher } from './forward-auth-config.js';
import { describedRequest } from './forward-auth-request.js';

/**
 * The forward-auth entry of a configuration: with `trustedProxies`, a caller whose TCP peer address is
 * not listed gets 403 before anything of its request is read (X-Forwarded-For is the client's word,
 * not the caller's); then asForwardAuthCall.
 */
export function forwardAuthEntry(config: ForwardAuthConfig): (ctx: GatewayContext) => void {
  if (config.trustedProxies === undefined) return asForwardAuthCall;
  const trusted = addressMatcher(config.trustedProxies);
  return function trustedForwardAuthCall(ctx) {
    if (!trusted(ctx.req.socket.remoteAddress)) {
      throw new HttpProblem(403, 'forbidden', 'this address may not ask the forward-auth endpoint (forwardAuth.trustedProxies)');
    }
    asForwardAuthCall(ctx);
  };
}

/**
 * For the own-endpoint lookup: a request to exactly the forward-auth path becomes the request it
 * describes (method, path and query from X-Forwarded-* / X-Original-*, see describedRequest) and runs
 * the pipeline to the `answer` hand-off. Every later step (authenticate, route, allow, rate limit)
 * judges the described request as it would judge that request sent to the gateway itself; credentials
 * and the client address are the forward-auth request's own.
 */
export function asForwardAuthCall(ctx: GatewayContext): void {
  const described = describedRequest(ctx.req);
  ctx.state.handOff = 'answer';
  ctx.state.forwardAuth = { path: ctx.path, host: described.host, proto: described.proto };
  ctx.method = described.method;
  ctx.path = described.path;
  ctx.querystring = described.querystring;
}

/**
 * The `answer` hand-off: 200 with an empty body and the identity headers (user, via, groups, and the
 * assertion when configured), never cached. The proxy in front copies them onto the request it sends
 * on. Refusals never get here: the steps threw (401 with WWW-Authenticate, 403, 429 with Retry-After).
 * Paging is not checked: the gateway cannot rewrite a request another proxy forwards.
 */
export function answerForwardAuth(signed: Assertions | undefined): (ctx: GatewayContext) => void {
  return function answer(ctx) {
    ctx.set(identityHeaders(ctx.state.principal!, ctx.state.route!, signed));
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 200;
    ctx.body = '';
  };
}
