import { HttpProblem } from '../../http/problem.js';
import type { GatewayExchange } from '../../http/state.js';
import type { RouteTable } from '../../routes/route-table.js';
import type { CredentialFacts, Principal } from '../../core/principal.js';
import { decide } from '../../authz/allow-rule.js';
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
    if (principal.credential) withinCredential(principal.credential, ex.path, ex.method);
    if (!route.allow) return;
    const decision = decide(route.allow, { user: principal.user, groups: principal.groups }, ex.method);
    if (!decision.allowed) throw new HttpProblem(403, 'forbidden', decision.detail);
  };
}

/**
 * A credential's own routes and methods (an API key's), an extra limit beside the route's rule: a path
 * listed or under one listed (any case, as routes match), a method listed. Outside them: 403.
 */
function withinCredential(credential: CredentialFacts, path: string, method: string): void {
  if (credential.methods.length > 0 && !credential.methods.includes(method)) {
    throw new HttpProblem(403, 'forbidden', `${method} is not among the methods of this credential (${credential.methods.join(', ')})`);
  }
  if (credential.routes.length === 0) return;
  const lower = path.toLowerCase();
  const within = credential.routes.some((r) => {
    const prefix = r.toLowerCase();
    return lower === prefix || (lower.startsWith(prefix) && (prefix.endsWith('/') || lower.charCodeAt(prefix.length) === 0x2f));
  });
  if (!within) throw new HttpProblem(403, 'forbidden', `${path} is not among the routes of this credential`);
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
