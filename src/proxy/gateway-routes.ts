import { canonicalQuery } from '../paging/normalize.js';
import { HttpProblem } from '../http/problem.js';
import type { GatewayMiddleware } from '../http/state.js';
import type { Forwarder } from './forward.js';
import { prepareUpstreamHeaders } from './headers.js';
import type { RouteTable } from './route-table.js';

const PAGED_METHODS = new Set(['GET', 'HEAD']);

/** Finds the route of the (normalized) path; 404 only after authentication. */
export function matchRoute(routes: RouteTable): GatewayMiddleware {
  return async function findRoute(ctx, next) {
    const route = routes.match(ctx.path);
    if (!route) throw new HttpProblem(404, 'not_found', `no service is configured for ${ctx.path}`);
    ctx.state.route = route;
    await next();
  };
}

/** Canonical paging, identity and forwarding headers, then the upstream: the tail of the chain. */
export function forwardToUpstream(forwarder: Forwarder, trustForwarded: boolean): GatewayMiddleware {
  return async function forwardRequest(ctx) {
    const route = ctx.state.route!;
    let search = ctx.querystring;
    if (route.paging && PAGED_METHODS.has(ctx.method)) {
      search = canonicalQuery(search, route.paging);
    }
    ctx.req.url = search ? `${ctx.path}?${search}` : ctx.path;
    prepareUpstreamHeaders(ctx.req, {
      principal: ctx.state.principal!,
      requestId: ctx.state.requestId,
      forwardAuthorization: route.forwardAuthorization,
      trustForwarded,
    });
    ctx.respond = false;
    await forwarder.forward(ctx.req, ctx.res, route.upstream);
  };
}
