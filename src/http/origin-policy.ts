import { clientHost, clientScheme } from '../proxy/headers.js';
import { HttpProblem } from './problem.js';
import type { GatewayExchange } from './state.js';

/**
 * The origin step. CORS headers of plain requests were settled by the own-endpoint lookup (so a 401
 * carries them too); what is left is the WebSocket handshake, to which browsers apply no CORS and send
 * cached Basic credentials cross-site (cross-site WebSocket hijacking). So:
 * - Basic: no Origin (not a browser), the gateway's own origin, or one the route's cors block lists by
 *   name; `*` does not count, since a browser sends the credentials by itself.
 * - Bearer: the token is something a page had to hold and send on purpose; on a route with a cors
 *   block the origin must be listed (or `*`), elsewhere any.
 */
export function originPolicy(trustForwarded: boolean): (ex: GatewayExchange) => void {
  return function checkOrigin(ex) {
    if (ex.handOff !== 'tunnel') return;
    const origin = ex.req.headers.origin;
    if (origin === undefined || origin === '') return;
    const policy = ex.route!.cors;
    const listed = policy !== undefined && policy.origins !== '*' && policy.origins.includes(origin);
    if (ex.principal!.ambient) {
      if (listed || origin === ownOrigin(ex, trustForwarded)) return;
      throw new HttpProblem(403, 'cors_not_allowed', 'this origin may not open a WebSocket with Basic credentials here');
    }
    if (policy && policy.origins !== '*' && !listed) {
      throw new HttpProblem(403, 'cors_not_allowed', 'this origin may not open a WebSocket here');
    }
  };
}

function ownOrigin(ex: GatewayExchange, trustForwarded: boolean): string | undefined {
  const req = ex.req;
  const host = clientHost(req, trustForwarded ? req.headers['x-forwarded-host'] : undefined);
  return host === undefined ? undefined : `${clientScheme(req, trustForwarded ? req.headers['x-forwarded-proto'] : undefined)}://${host}`;
}
