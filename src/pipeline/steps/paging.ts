import type { GatewayExchange } from '../../http/state.js';
import { canonicalQuery, refusePagingVariants } from '../../paging/normalize.js';

const PAGED_METHODS = new Set(['GET', 'HEAD']);

/**
 * The paging step: the request target the upstream gets. A paged route's GET or HEAD (a WebSocket
 * handshake included) has its `size`, `page` and `sort` validated and rewritten to the one canonical
 * form (400 otherwise; also for `SIZE`, `size[]` and other spellings of the names); with stripPrefix the
 * rest of the path, cut by the route path's length (routes match without regard to case), is what the
 * upstream sees.
 */
export function paging(ex: GatewayExchange): void {
  const route = ex.route!;
  // A forward-auth answer: the gateway cannot rewrite what another proxy forwards (docs/authorization.md),
  // but refuses what an upstream would read as a second paging parameter.
  if (ex.handOff === 'answer') {
    if (route.paging && PAGED_METHODS.has(ex.method)) refusePagingVariants(ex.query);
    return;
  }
  let search = ex.query;
  if (route.paging && PAGED_METHODS.has(ex.method)) search = canonicalQuery(search, route.paging);
  const path = route.stripPrefix ? ex.path.slice(route.path.length) || '/' : ex.path;
  ex.req.url = search ? `${path}?${search}` : path;
}
