import { continueIfExpected } from '../../http/expect.js';
import type { GatewayExchange } from '../../http/state.js';
import { signedAssertion, type Assertions } from '../../identity/identity-headers.js';
import { headerSafe, upstreamHeaderObject } from '../../core/headers.js';
import { withoutCookies } from '../../auth/seal.js';

/**
 * The upstream headers step: the header object the upstream gets, put on the exchange (the request's
 * own headers stay as Node parsed them; see upstreamHeaderObject: hop-by-hop, identity, forwarding and
 * override headers a client sent are left out, the gateway's own set), with
 * X-Authenticated-Groups and the identity assertion when configured. A handshake keeps its upgrade: it
 * is what this hop is for. A forward-auth call has no upstream: its answer carries the identity headers.
 * The gateway's own cookies (`ownCookies`: the sign-in session and state) are credentials like
 * Authorization: the upstream gets them only on a route with forwardAuthorization.
 */
export function upstreamHeaders(trustForwarded: boolean, signed?: Assertions, consumed?: { header: string; bearerPrefix: string }, ownCookies?: (name: string) => boolean): (ex: GatewayExchange) => void {
  const reserved = signed?.header;
  return function setUpstreamHeaders(ex) {
    if (ex.handOff === 'answer') return;
    const route = ex.route!;
    const req = ex.req;
    // Authenticated, routed and within its limit: only now may the client send its body (Expect is
    // not forwarded: the gateway answers it itself).
    continueIfExpected(ex);
    const principal = ex.principal!;
    const h = upstreamHeaderObject(req, {
      principal,
      requestId: ex.requestId,
      forwardAuthorization: route.forwardAuthorization,
      allowHeaders: route.allowHeaders,
      trustForwarded,
      reserved,
      consumed,
    });
    if (ownCookies && h.cookie !== undefined && !route.forwardAuthorization) {
      const rest = withoutCookies(h.cookie, ownCookies);
      if (rest === undefined) delete h.cookie;
      else h.cookie = rest;
    }
    const groups = principal.groups;
    // No groups: no header (a client's copy was left out above).
    if (groups !== undefined && groups.length > 0) h['x-authenticated-groups'] = groups.map(headerSafe).join(',');
    if (signed) h[signed.header] = signedAssertion(principal, route.audience, signed, ex.certificate);
    if (ex.handOff === 'tunnel') {
      h.connection = 'Upgrade';
      h.upgrade = 'websocket';
    }
    ex.upstreamHeaders = h;
  };
}
