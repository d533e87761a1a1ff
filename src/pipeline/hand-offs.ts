import { HttpProblem, shuttingDown } from '../http/problem.js';
import type { GatewayExchange, HandOffName } from '../http/state.js';
import type { ForwardOptions } from '../proxy/forward.js';
import type { Forwarders } from '../proxy/forwarders.js';
import type { Route } from '../routes/route-table.js';
import type { Tunnels } from '../proxy/tunnels.js';
import { offeredProtocols, switchClient, switchProblem } from '../proxy/websocket.js';
import { takePendingBytes } from '../proxy/websocket-protocol.js';
import type { Step } from './step.js';

/** The last step of the pipeline, one per HandOffName; the request form (or the lookup) picks it. */
export type HandOffs = Record<HandOffName, Step>;

/** What forwarding needs of a route, made once per route. */
const optionsOf = new WeakMap<Route, ForwardOptions>();
function forwardOptions(route: Route): ForwardOptions {
  let options = optionsOf.get(route);
  if (!options) {
    // The route step let only routes with an upstream through to forward and tunnel.
    options = { upstream: route.upstream!, timeouts: route.timeouts, strippedPrefix: route.stripPrefix ? route.path : undefined };
    optionsOf.set(route, options);
  }
  return options;
}

/**
 * forward: the request to the route's upstream, with the header object the upstream headers step put on
 * the exchange; the answer back (http-proxy for HTTP/1.1 upstreams, node:http2 for h2c and h2: Forwarders).
 */
export function forward(forwarder: Forwarders): Step {
  return function forwardRequest(ex) {
    return forwarder.forward(ex.req, ex.res, forwardOptions(ex.route!), ex);
  };
}

/**
 * tunnel: a WebSocket handshake, forwarded like any request (same pool and health, timeouts, retry,
 * Location rewrite of a non-101 answer). A 101 that passes switchProblem becomes a tunnel in the
 * registry; any other 101 is a 502.
 */
export function tunnel(forwarder: Forwarders, tunnels: Tunnels, maxTunnels: (upstream: string) => number): Step {
  return async function tunnelHandshake(ex) {
    if (tunnels.closing) throw shuttingDown();
    // The 101 is written from the response's headers (switchClient), any other answer through the Forwarder.
    ex.stampId();
    const route = ex.route!;
    const name = route.upstream!;
    const max = maxTunnels(name);
    if (!tunnels.admit(name, max)) throw tooManyTunnels(name, max);
    // The place is given back once the handshake has its answer: a 101 has made it a tunnel by then
    // (written on the socket, not through res); any other answer is for a client that may retry at
    // once, so at its last byte rather than when the exchange's bookkeeping ends.
    let held = true;
    const settle = () => {
      if (held) tunnels.settled(name);
      held = false;
    };
    ex.res.once('finish', settle);
    try {
      await handshake(ex);
    } finally {
      ex.res.off('finish', settle);
      settle();
    }
  };

  function handshake(ex: GatewayExchange): Promise<void> {
    const { req, res } = ex;
    const route = ex.route!;
    const clientHead = takePendingBytes(req);
    const key = req.headers['sec-websocket-key'];
    const offered = offeredProtocols(req.headers['sec-websocket-protocol']);
    return forwarder.forward(req, res, {
      ...forwardOptions(route),
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
        tunnels.add(client, upstream, ex.principal!, { requestId: ex.requestId, path: ex.path, upstream: route.upstream! });
        return undefined;
      },
    }, ex);
  }
}

/** The answer to a handshake when its upstream has maxTunnels open or opening: 503, retry shortly. */
function tooManyTunnels(upstream: string, max: number): HttpProblem {
  return new HttpProblem(503, 'service_unavailable', `the ${upstream} service has as many WebSocket connections as it may take (${max}); retry shortly`, {
    headers: { 'Retry-After': '1' },
  });
}

