import type { Config } from '../config/types.js';
import { JWKS_PATH } from '../identity/jwks.js';
import { corsLookup, type OwnHandler } from '../http/cors.js';
import { healthz, readyz } from '../http/health.js';
import { openApi } from '../http/openapi.js';
import { isTokenPath } from '../http/request-form.js';
import type { GatewayExchange } from '../http/state.js';
import type { RouteTable } from '../routes/route-table.js';
import type { SecurityScheme } from '../auth/authenticator.js';

export type { OwnHandler };

/** An exact path the gateway answers itself, and the methods it answers there (undefined: any). */
interface ExactEndpoint {
  methods?: ReadonlySet<string>;
  handler: OwnHandler;
}

const READ = new Set(['GET', 'HEAD']);

export interface OwnEndpointDeps {
  ping: () => Promise<void>;
  /** Which writes the store refuses while ready (see readyz). */
  refused?: () => string | undefined;
  tokenEndpoints: OwnHandler;
  /** GET /.well-known/jwks.json (identity assertions configured). */
  jwks?: OwnHandler;
  /**
   * The forward-auth path: turned into the request it describes, ending in `answer` (enter returns
   * undefined), or answered by the handler enter returns (a relayed refusal's replay).
   */
  forwardAuth?: { path: string; enter: (ex: GatewayExchange) => OwnHandler | undefined };
  /** The OpenAPI security schemes of the authenticators that are on (see Authenticator.securityScheme). */
  securitySchemes: readonly SecurityScheme[];
  /** More exact paths (the sign-in endpoints of `login`). */
  more?: ReadonlyArray<[string, ExactEndpoint]>;
}

/**
 * The one lookup, before the pipeline, of what the gateway answers itself: exact paths (health,
 * readiness, the OpenAPI document, the JWK Set of identity assertions), CORS preflights, and
 * /v1/tokens/* (served by the token router; anything under it the router does not know is its 404,
 * never forwarded). It runs on the normalized path the request form left. A hit is answered by its
 * handler; a miss goes down the pipeline (the forward-auth path too, as the request it describes,
 * ending in the `answer` hand-off).
 */
export function ownEndpoints(config: Config, routes: RouteTable, deps: OwnEndpointDeps): (ex: GatewayExchange) => OwnHandler | undefined {
  const exact = new Map<string, ExactEndpoint>([
    ['/healthz', { handler: healthz }],
    ['/readyz', { handler: readyz(deps.ping, deps.refused) }],
    ['/openapi.json', { methods: READ, handler: openApi(config, deps.securitySchemes) }],
  ]);
  if (deps.jwks) exact.set(JWKS_PATH, { methods: READ, handler: deps.jwks });
  for (const [path, endpoint] of deps.more ?? []) exact.set(path, endpoint);
  const forwardAuth = deps.forwardAuth;
  const cors = corsLookup(routes, config.tokens.cors);
  return function findOwnEndpoint(ex) {
    const path = ex.path;
    if (forwardAuth && path === forwardAuth.path) {
      // A miss that runs the pipeline about another request (see asForwardAuthCall), or a replay.
      return forwardAuth.enter(ex);
    }
    const own = exact.get(path);
    if (own && (!own.methods || own.methods.has(ex.method))) return own.handler;
    // The preflight, or the CORS headers every answer on this path will carry.
    const preflight = cors(ex);
    if (preflight) return preflight;
    return isTokenPath(path) ? deps.tokenEndpoints : undefined;
  };
}
