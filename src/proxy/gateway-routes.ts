import { normalizePaging } from '../paging/normalize.js';
import { HttpProblem } from '../http/problem.js';
import type { GatewayMiddleware } from '../http/state.js';
import type { Forwarder } from './forward.js';
import { prepareUpstreamHeaders } from './headers.js';
import type { RouteTable } from './route-table.js';

const PAGED_METHODS = new Set(['GET', 'HEAD']);

/** Route, canonical paging, forward: the tail of the chain for every authenticated request. */
export function proxyToUpstream(routes: RouteTable, forwarder: Forwarder, trustForwarded: boolean): GatewayMiddleware {
  return async function forwardRequest(ctx) {
    const route = routes.match(ctx.path);
    if (!route) throw new HttpProblem(404, 'not_found', `no service is configured for ${ctx.path}`);
    let search = ctx.querystring;
    if (route.paging && PAGED_METHODS.has(ctx.method)) {
      search = normalizePaging(new URLSearchParams(search), route.paging).toString();
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
