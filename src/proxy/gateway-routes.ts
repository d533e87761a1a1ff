import { canonicalQuery } from '../paging/normalize.js';
import { continueIfExpected } from '../http/expect.js';
import { HttpProblem } from '../http/problem.js';
import type { GatewayMiddleware } from '../http/state.js';
import type { Forwarder } from './forward.js';
import { prepareUpstreamHeaders } from './headers.js';
import type { RouteTable } from './route-table.js';

const PAGED_METHODS = new Set(['GET', 'HEAD']);

/** Finds the route of the (normalized) path; 404 only after authentication. */
export function matchRoute(routes: RouteTable): GatewayMiddleware {
  return function findRoute(ctx, next) {
    const route = routes.match(ctx.path);
    if (!route) throw new HttpProblem(404, 'not_found', `no service is configured for ${ctx.path}`);
    ctx.state.route = route;
    return next();
  };
}

/** Canonical paging, identity and forwarding headers, then the upstream: the tail of the chain. */
export function forwardToUpstream(forwarder: Forwarder, trustForwarded: boolean): GatewayMiddleware {
  return async function forwardRequest(ctx) {
    const route = ctx.state.route!;
    if (route.upstream === undefined) throw forwardAuthOnly(route.path);
    let search = ctx.querystring;
    if (route.paging && PAGED_METHODS.has(ctx.method)) {
      search = canonicalQuery(search, route.paging);
    }
    // With stripPrefix the upstream sees the rest of the path, joined onto its own URL's path.
    const path = route.stripPrefix ? ctx.path.slice(route.path.length) || '/' : ctx.path;
    ctx.req.url = search ? `${path}?${search}` : path;
    // Authenticated, routed and within its limit: only now may the client send its body.
    continueIfExpected(ctx);
    prepareUpstreamHeaders(ctx.req, {
      principal: ctx.state.principal!,
      requestId: ctx.state.requestId,
      forwardAuthorization: route.forwardAuthorization,
      allowHeaders: route.allowHeaders,
      trustForwarded,
    });
    ctx.respond = false;
    const outcome = await forwarder.forward(ctx.req, ctx.res, {
      upstream: route.upstream,
      timeouts: route.timeouts,
      strippedPrefix: route.stripPrefix ? route.path : undefined,
    });
    ctx.state.outcome = outcome;
  };
}

/** A route without upstream is there for forward-auth answers only. */
export function forwardAuthOnly(path: string): HttpProblem {
  return new HttpProblem(404, 'not_found', `the route ${path} is served by another proxy (forward-auth only)`);
}
