import { HttpProblem } from '../../core/problem.js';
import type { GatewayExchange } from '../../http/state.js';
import type { RouteTable } from '../../routes/route-table.js';
import type { Principal } from '../../core/principal.js';
import { decide } from '../../authz/allow.js';
import type { Groups } from '../../authz/groups.js';

/**
 * The allow step (after authenticate and route): the principal gets its groups (read once, here, for
 * every later step: identity headers, the assertion, the access line), then the route's allow rule
 * judges it and the method. Denied: 403 `forbidden`; 401 stays for credentials. Proxied requests,
 * WebSocket handshakes and forward-auth answers all pass this one step (a forward-auth call is judged on
 * the method and path it describes).
 */
export function allowRules(groups: Groups): (ex: GatewayExchange) => void {
  return function checkAllowRules(ex) {
    const principal = ex.principal!;
    principal.groups ??= groups.of(principal.user);
    const route = ex.route!;
    if (!route.allow) return;
    const decision = decide(route.allow, { user: principal.user, groups: principal.groups }, ex.method);
    if (!decision.allowed) throw new HttpProblem(403, 'forbidden', decision.detail);
  };
}

/**
 * Whether an open tunnel's owner may still use the route of `path` under the routes and groups in force
 * now (a tunnel is a GET handshake that stays open): a user removed from a group, a rule changed by a
 * reload, a route removed or one that no longer takes WebSocket connections ends it.
 */
export function stillAllowed(routes: RouteTable, groups: Groups, owner: Principal, path: string): boolean {
  const route = routes.match(path);
  if (!route || !route.websocket || route.upstream === undefined) return false;
  if (!route.allow) return true;
  return decide(route.allow, { user: owner.user, groups: owner.ownGroups ? owner.groups ?? [] : groups.of(owner.user) }, 'GET').allowed;
}
