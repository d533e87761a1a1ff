import type { GatewayExchange } from '../http/state.js';
import { canonicalQuery } from './normalize.js';

const PAGED_METHODS = new Set(['GET', 'HEAD']);

/**
 * The paging step: the request target the upstream gets. A paged route's GET or HEAD (a WebSocket
 * handshake included) has its `size`, `page` and `sort` validated and rewritten to the one canonical
 * form (400 otherwise); with stripPrefix the rest of the path is what the upstream sees.
 */
export function paging(ex: GatewayExchange): void {
  // A forward-auth answer: the gateway cannot rewrite what another proxy forwards (docs/authorization.md).
  if (ex.handOff === 'answer') return;
  const route = ex.route!;
  let search = ex.query;
  if (route.paging && PAGED_METHODS.has(ex.method)) search = canonicalQuery(search, route.paging);
  const path = route.stripPrefix ? ex.path.slice(route.path.length) || '/' : ex.path;
  ex.req.url = search ? `${path}?${search}` : path;
}
