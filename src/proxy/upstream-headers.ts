import { continueIfExpected } from '../http/expect.js';
import type { GatewayContext } from '../http/state.js';
import { identityHeaders, type Assertions } from '../identity/identity-headers.js';
import { prepareUpstreamHeaders } from './headers.js';

/**
 * The upstream headers step: hop-by-hop, identity, forwarding and override headers a client sent are
 * removed, then the gateway's own (X-Authenticated-User/-Via/-Groups, the identity assertion when
 * configured, X-Request-Id, X-Forwarded-*) set. A handshake keeps its upgrade: it is what this hop is
 * for. A forward-auth call has no upstream: its answer carries the identity headers instead.
 */
export function upstreamHeaders(trustForwarded: boolean, signed?: Assertions): (ctx: GatewayContext) => void {
  return function setUpstreamHeaders(ctx) {
    if (ctx.state.handOff === 'answer') return;
    const route = ctx.state.route!;
    const req = ctx.req;
    // Authenticated, routed and within its limit: only now may the client send its body (this step
    // removes Expect, which the gateway answers itself).
    continueIfExpected(ctx);
    const principal = ctx.state.principal!;
    prepareUpstreamHeaders(req, {
      principal,
      requestId: ctx.state.requestId,
      forwardAuthorization: route.forwardAuthorization,
      allowHeaders: route.allowHeaders,
      trustForwarded,
    });
    const h = req.headers;
    // The configured assertion header, whatever its name: a client's copy never passes (also as `_`).
    if (signed) for (const name in h) if (name.replace(/_/g, '-') === signed.header) delete h[name];
    const identity = identityHeaders(principal, route, signed);
    // No groups: no header (a client's copy was removed above).
    if (identity['x-authenticated-groups'] === '') delete identity['x-authenticated-groups'];
    Object.assign(h, identity);
    if (ctx.state.handOff === 'tunnel') {
      req.headers.connection = 'Upgrade';
      req.headers.upgrade = 'websocket';
    }
  };
}
