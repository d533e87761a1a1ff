import { continueIfExpected } from '../http/expect.js';
import type { GatewayContext } from '../http/state.js';
import { prepareUpstreamHeaders } from './headers.js';

/**
 * The upstream headers step: hop-by-hop, identity, forwarding and override headers a client sent are
 * removed, then the gateway's own (X-Authenticated-User/-Via, X-Request-Id, X-Forwarded-*) set. A
 * handshake keeps its upgrade: it is what this hop is for.
 */
export function upstreamHeaders(trustForwarded: boolean): (ctx: GatewayContext) => void {
  return function setUpstreamHeaders(ctx) {
    const route = ctx.state.route!;
    const req = ctx.req;
    // Authenticated, routed and within its limit: only now may the client send its body (this step
    // removes Expect, which the gateway answers itself).
    continueIfExpected(ctx);
    prepareUpstreamHeaders(req, {
      principal: ctx.state.principal!,
      requestId: ctx.state.requestId,
      forwardAuthorization: route.forwardAuthorization,
      allowHeaders: route.allowHeaders,
      trustForwarded,
    });
    if (ctx.state.handOff === 'tunnel') {
      req.headers.connection = 'Upgrade';
      req.headers.upgrade = 'websocket';
    }
  };
}
