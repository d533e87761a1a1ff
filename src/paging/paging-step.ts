import type { GatewayContext } from '../http/state.js';
import { canonicalQuery, refusePagingVariants } from './normalize.js';

const PAGED_METHODS = new Set(['GET', 'HEAD']);

/**
 * The paging step: the request target the upstream gets. A paged route's GET or HEAD (a WebSocket
 * handshake included) has its `size`, `page` and `sort` validated and rewritten to the one canonical
 * form (400 otherwise; also for `SIZE`, `size[]` and other spellings of the names); with stripPrefix the
 * rest of the path, cut by the route path's length (routes match without regard to case), is what the
 * upstream sees.
 */
export function paging(ctx: GatewayContext): void {
  const route = ctx.state.route!;
  // A forward-auth answer: the gateway cannot rewrite what another proxy forwards (docs/authorization.md),
  // but refuses what an upstream would read as a second paging parameter.
  if (ctx.state.handOff === 'answer') {
    if (route.paging && PAGED_METHODS.has(ctx.method)) refusePagingVariants(ctx.querystring);
    return;
  }
  let search = ctx.querystring;
  if (route.paging && PAGED_METHODS.has(ctx.method)) search = canonicalQuery(search, route.paging);
  const path = route.stripPrefix ? ctx.path.slice(route.path.length) || '/' : ctx.path;
  ctx.req.url = search ? `${path}?${search}` : path;
}
