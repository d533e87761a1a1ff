import type { GatewayExchange } from '../../http/state.js';
import type { Route } from '../../routes/route-table.js';
import type { PagingRules } from '../../config/types.js';
import { canonicalQuery, refusePagingVariants } from '../../paging/normalize.js';

const PAGED_METHODS = new Set(['GET', 'HEAD']);
/**
 * Canonical queries kept per paging rule set (a list's clients ask for the same pages again and again):
 * at most this many, of at most CACHED_QUERY_LENGTH characters each (some 5 MB at worst).
 */
const CACHED_QUERIES = 10_000;
const CACHED_QUERY_LENGTH = 256;
const canonicalOf = new WeakMap<PagingRules, Map<string, string>>();

/** canonicalQuery, each query string worked out once per rule set (refusals are not kept: they throw each time). */
function canonical(search: string, rules: PagingRules): string {
  if (search.length > CACHED_QUERY_LENGTH) return canonicalQuery(search, rules);
  let known = canonicalOf.get(rules);
  if (!known) canonicalOf.set(rules, (known = new Map()));
  let out = known.get(search);
  if (out === undefined) {
    out = canonicalQuery(search, rules);
    if (known.size >= CACHED_QUERIES) known.clear();
    known.set(search, out);
  }
  return out;
}

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
  const paged = route.paging !== undefined && PAGED_METHODS.has(ex.method);
  if (ex.path === route.path && ex.query.length <= CACHED_QUERY_LENGTH) {
    ex.req.url = routeTarget(route, ex.query, paged);
    return;
  }
  const search = paged ? canonical(ex.query, route.paging!) : ex.query;
  const path = route.stripPrefix ? ex.path.slice(route.path.length) || '/' : ex.path;
  ex.req.url = search ? `${path}?${search}` : path;
}

/**
 * The same characters as one plain string, like the request targets Node's parser makes (not a string
 * joined from pieces): Node's client checks the path of every request it sends with a regular
 * expression, which first copies a joined string into one. Targets are Latin-1 (the parser's); anything
 * else is left as it is.
 */
function sequential(s: string): string {
  // eslint-disable-next-line no-control-regex
  return /^[\x00-\xff]*$/.test(s) ? Buffer.from(s, 'latin1').toString('latin1') : s;
}

/** Per route: the upstream's request target for the route's own path, by query (paged, unpaged). */
const targetsOf = new WeakMap<Route, [Map<string, string>, Map<string, string>]>();

/**
 * The target the upstream gets for a request to the route's own path (a list endpoint: the common
 * case), kept per query string: one string, reused, rather than a new one per request (which Node's
 * client then checks again).
 */
function routeTarget(route: Route, query: string, paged: boolean): string {
  let both = targetsOf.get(route);
  if (!both) targetsOf.set(route, (both = [new Map(), new Map()]));
  const known = both[paged ? 0 : 1];
  let target = known.get(query);
  if (target === undefined) {
    // Kept here whole, so not also in canonical()'s cache.
    const search = paged ? canonicalQuery(query, route.paging!) : query;
    const path = route.stripPrefix ? '/' : route.path;
    target = sequential(search ? `${path}?${search}` : path);
    if (known.size >= CACHED_QUERIES) known.clear();
    known.set(query, target);
  }
  return target;
}
