import { hasTrailingDotsOrSpaces, withoutPathParameters, withoutTrailingDotsAndSpaces } from '../../core/path.js';
import { HttpProblem } from '../../http/problem.js';
import type { GatewayExchange } from '../../http/state.js';
import type { RouteTable } from '../../routes/route-table.js';

/**
 * The route step: the route of the (normalized) path, 404 only after authentication (an anonymous
 * client learns nothing about which paths exist). A handshake needs a route that takes WebSocket; a
 * route without upstream (forward-auth only) serves forward-auth answers and nothing else.
 *
 * A path with path parameters (`;` in a segment) has two readings: the servlet containers drop them
 * (`/api/admin;x/report` is their `/api/admin/report`), most other servers keep them as part of the
 * segment. The gateway cannot know its upstream's, so it judges such a path only when both readings have
 * the same route (the same allow rules, paging and limits); otherwise 400 `invalid_path`, nothing forwarded.
 * Likewise a segment's trailing dots and spaces, which IIS and ASP.NET drop (`/api/admin./report` is their
 * `/api/admin/report`), and both at once (`admin.;x`, `admin%20;x`).
 */
export function route(routes: RouteTable): (ex: GatewayExchange) => void {
  return function findRoute(ex) {
    const found = routes.match(ex.path);
    if (ex.path.includes(';')) {
      const without = withoutPathParameters(ex.path);
      if (routes.match(without) !== found || routes.match(withoutTrailingDotsAndSpaces(without)) !== found) {
        throw new HttpProblem(400, 'invalid_path', 'a path parameter (;) in this path would make some upstreams serve a path of another route; send the path without it');
      }
    }
    if (hasTrailingDotsOrSpaces(ex.path) && routes.match(withoutTrailingDotsAndSpaces(ex.path)) !== found) {
      throw new HttpProblem(400, 'invalid_path', 'a segment ending in a dot or a space in this path would make some upstreams (IIS, ASP.NET) serve a path of another route; send the path without them');
    }
    if (!found) throw new HttpProblem(404, 'not_found', `no service is configured for ${ex.path}`);
    if (ex.handOff === 'tunnel' && !found.websocket) {
      throw new HttpProblem(403, 'websocket_not_allowed', `the route ${found.path} does not accept WebSocket connections`);
    }
    if (found.upstream === undefined && ex.handOff !== 'answer') {
      throw new HttpProblem(404, 'not_found', `the route ${found.path} is served by another proxy (forward-auth only)`);
    }
    ex.route = found;
  };
}
