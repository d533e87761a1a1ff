import { shuttingDown } from '../http/problem.js';
import type { GatewayContext, HandOffName } from '../http/state.js';
import type { Forwarder } from '../proxy/forward.js';
import type { Tunnels } from '../proxy/tunnels.js';
import { offeredProtocols, switchClient, switchProblem } from '../proxy/websocket.js';
import { takePendingBytes } from '../http/request-form.js';
import type { Step } from './step.js';

/** The last step of the pipeline, one per HandOffName; the request form (or the lookup) picks it. */
export type HandOffs = Record<HandOffName, Step>;

function forwardOptions(ctx: GatewayContext) {
  const route = ctx.state.route!;
  // The route step let only routes with an upstream through to forward and tunnel.
  return { upstream: route.upstream!, timeouts: route.timeouts, strippedPrefix: route.stripPrefix ? route.path : undefined };
}

/** forward: the request to the route's upstream, the answer back (http-proxy, see Forwarder). */
export function forward(forwarder: Forwarder): Step {
  return async function forwardRequest(ctx) {
    ctx.respond = false;
    ctx.state.outcome = await forwarder.forward(ctx.req, ctx.res, forwardOptions(ctx));
  };
}

/**
 * tunnel: a WebSocket handshake, forwarded like any request (same pool and health, timeouts, retry,
 * Location rewrite of a non-101 answer). A 101 that passes switchProblem becomes a tunnel in the
 * registry; any other 101 is a 502.
 */
export function tunnel(forwarder: Forwarder, tunnels: Tunnels): Step {
  return async function tunnelHandshake(ctx) {
    if (tunnels.closing) throw shuttingDown();
    const { req, res } = ctx;
    const route = ctx.state.route!;
    const clientHead = takePendingBytes(req);
    const key = req.headers['sec-websocket-key'];
    const offered = offeredProtocols(req.headers['sec-websocket-protocol']);
    ctx.respond = false;
    ctx.state.outcome = await forwarder.forward(req, res, {
      ...forwardOptions(ctx),
      onSwitch(upstreamRes, upstream, upstreamHead) {
        const wrong = switchProblem(upstreamRes, key, offered);
        if (wrong !== undefined) return wrong;
        if (tunnels.closing) {
          upstream.destroy();
          return 'the gateway is shutting down';
        }
        const client = switchClient(res, upstreamRes, upstreamHead);
        if (!client) {
          upstream.destroy();
          return undefined;
        }
        if (clientHead.length > 0) upstream.write(clientHead);
        upstream.setNoDelay(true);
        // The path the client asked for (the paging step left the upstream's in req.url: stripPrefix).
        const path = route.stripPrefix ? route.path + (ctx.path === '/' ? '' : ctx.path) : ctx.path;
        tunnels.add(client, upstream, ctx.state.principal!, { requestId: ctx.state.requestId, path, upstream: route.upstream! });
        return undefined;
      },
    });
  };
}

