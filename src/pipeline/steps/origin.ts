import { clientHost, clientScheme } from '../../core/headers.js';
import { HttpProblem } from '../../core/problem.js';
import type { GatewayExchange } from '../../http/state.js';

/** Methods a cross-site page may cause with the user's credentials without harm (RFC 9110 section 9.2.1). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The origin step. CORS headers of plain requests were settled by the own-endpoint lookup (so a 401
 * carries them too); what is left is what a browser sends cross-site with cached Basic credentials by
 * itself, past any CORS: the WebSocket handshake (cross-site WebSocket hijacking) and the unsafe
 * methods (a cross-site form POST, a `fetch` with `mode: 'no-cors'`: cross-site request forgery). So:
 * - Basic, WebSocket handshake or a method other than GET/HEAD/OPTIONS: no Origin (not a browser), the
 *   gateway's own origin, or one the route's cors block lists by name; `*` does not count, since a
 *   browser sends the credentials by itself. Without an Origin, `Sec-Fetch-Site: cross-site` or
 *   `same-site` is refused too (browsers send Origin on unsafe methods anyway; a sibling host is another
 *   origin: list it in the route's cors block to allow it). Forward-auth answers judge the method and
 *   the origin (X-Forwarded-Proto and -Host) of the request they describe.
 * - Bearer: the token is something a page had to hold and send on purpose; on a route with a cors
 *   block a WebSocket handshake's origin must be listed (or `*`), elsewhere any.
 */
export function originPolicy(trustForwarded: boolean): (ex: GatewayExchange) => void {
  return function checkOrigin(ex) {
    // Credentials a browser sends by itself (Basic): a cross-site page could make it send them.
    const ambient = ex.principal!.ambient;
    if (ex.handOff !== 'tunnel') {
      if (ambient && !SAFE_METHODS.has(ex.method)) checkAmbientUnsafe(ex, trustForwarded);
      return;
    }
    const origin = ex.req.headers.origin;
    if (origin === undefined || origin === '') return;
    const listed = listedOrigin(ex, origin);
    if (ambient) {
      if (listed || origin === ownOrigin(ex, trustForwarded)) return;
      throw new HttpProblem(403, 'cors_not_allowed', 'this origin may not open a WebSocket with Basic credentials here');
    }
    const policy = ex.route!.cors;
    if (policy && policy.origins !== '*' && !listed) {
      throw new HttpProblem(403, 'cors_not_allowed', 'this origin may not open a WebSocket here');
    }
  };
}

function checkAmbientUnsafe(ex: GatewayExchange, trustForwarded: boolean): void {
  const origin = ex.req.headers.origin;
  if (origin !== undefined && origin !== '') {
    if (listedOrigin(ex, origin) || origin === ownOrigin(ex, trustForwarded)) return;
  } else {
    const site = ex.req.headers['sec-fetch-site'];
    if (site !== 'cross-site' && site !== 'same-site') return;
  }
  throw new HttpProblem(403, 'cors_not_allowed', `another site may not send a ${ex.method} with Basic credentials here (a page's own origin, or one the route's cors block lists, may)`);
}

/** Listed by name in the route's cors block (`*` lists none). */
function listedOrigin(ex: GatewayExchange, origin: string): boolean {
  const policy = ex.route!.cors;
  return policy !== undefined && policy.origins !== '*' && policy.origins.includes(origin);
}

/** scheme://host the client addressed: of the described request for a forward-auth call. */
function ownOrigin(ex: GatewayExchange, trustForwarded: boolean): string | undefined {
  const req = ex.req;
  const described = ex.forwardAuth;
  if (described) {
    const host = described.host ?? req.headers.host;
    return host === undefined ? undefined : `${described.proto ?? clientScheme(req)}://${host}`;
  }
  const host = clientHost(req, trustForwarded ? req.headers['x-forwarded-host'] : undefined);
  return host === undefined ? undefined : `${clientScheme(req, trustForwarded ? req.headers['x-forwarded-proto'] : undefined)}://${host}`;
}
