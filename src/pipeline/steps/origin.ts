import { clientHost, clientScheme } from '../../core/headers.js';
import { HttpProblem } from '../../http/problem.js';
import type { GatewayExchange } from '../../http/state.js';

/** Methods a cross-site page may cause with the user's credentials without harm (RFC 9110 section 9.2.1). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The origin step. CORS headers of plain requests were settled by the own-endpoint lookup (so a 401
 * carries them too); what is left is what a browser sends cross-site with cached Basic credentials by
 * itself, past any CORS: the WebSocket handshake (cross-site WebSocket hijacking) and the unsafe
 * methods (a cross-site form POST, a `fetch` with `mode: 'no-cors'`: cross-site request forgery). So:
 * - Basic (or a client certificate), WebSocket handshake or a method other than GET/HEAD/OPTIONS: no
 *   Origin (not a browser), the gateway's own origin, or one the route's cors block lists by name; `*`
 *   does not count, since a browser sends the credentials by itself. Without an Origin,
 *   `Sec-Fetch-Site: cross-site` or `same-site` is refused too (browsers send Origin on unsafe methods
 *   anyway; a sibling host is another origin: list it in the route's cors block to allow it).
 *   Forward-auth answers judge the method and the origin (X-Forwarded-Proto and -Host) of the request
 *   they describe.
 * - A browser session's cookie (`oidc-session`) on a method other than GET/HEAD/OPTIONS: as above, but
 *   "no Origin" is no pass: only a browser holds the cookie, so the request must say where it comes
 *   from: an Origin as above, or else `Sec-Fetch-Site: same-origin`.
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
      throw new HttpProblem(403, 'cors_not_allowed', `this origin may not open a WebSocket with ${credentialOf(ex)} here`);
    }
    const policy = ex.route!.cors;
    if (policy && policy.origins !== '*' && !listed) {
      throw new HttpProblem(403, 'cors_not_allowed', 'this origin may not open a WebSocket here');
    }
  };
}

function checkAmbientUnsafe(ex: GatewayExchange, trustForwarded: boolean): void {
  const origin = ex.req.headers.origin;
  const cookie = ex.principal!.via === 'oidc-session';
  if (origin !== undefined && origin !== '') {
    if (listedOrigin(ex, origin) || origin === ownOrigin(ex, trustForwarded)) return;
  } else {
    const site = ex.req.headers['sec-fetch-site'];
    if (cookie) {
      if (site === 'same-origin') return;
      throw new HttpProblem(403, 'cors_not_allowed', `a ${ex.method} with the session cookie needs an Origin header (or Sec-Fetch-Site: same-origin): browsers send one, and it is how the gateway tells its own pages from another site's`);
    }
    if (site !== 'cross-site' && site !== 'same-site') return;
  }
  throw new HttpProblem(403, 'cors_not_allowed', `another site may not send a ${ex.method} with ${credentialOf(ex)} here (a page's own origin, or one the route's cors block lists, may)`);
}

/** The credential a browser sent by itself, as a 403 names it. */
function credentialOf(ex: GatewayExchange): string {
  switch (ex.principal!.via) {
    case 'oidc-session':
      return 'the session cookie';
    case 'mtls':
      return 'a client certificate';
    default:
      return 'Basic credentials';
  }
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
