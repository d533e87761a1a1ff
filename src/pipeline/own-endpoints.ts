import type { Config } from '../config/types.js';
import { corsLookup, type OwnHandler } from '../http/cors.js';
import { healthz, readyz } from '../http/health.js';
import { openApi } from '../http/openapi.js';
import { isTokenPath } from '../http/request-form.js';
import type { GatewayContext } from '../http/state.js';
import type { RouteTable } from '../proxy/route-table.js';

export type { OwnHandler };

/** An exact path the gateway answers itself, and the methods it answers there (undefined: any). */
interface ExactEndpoint {
  methods?: ReadonlySet<string>;
  handler: OwnHandler;
}

const READ = new Set(['GET', 'HEAD']);

/**
 * The one lookup, before the pipeline, of what the gateway answers itself: exact paths (health,
 * readiness, the OpenAPI document), CORS preflights, and /v1/tokens/* (served by the token router;
 * anything under it the router does not know is its 404, never forwarded). It runs on the normalized
 * path the request form left. A hit is answered by its handler; a miss goes down the pipeline.
 */
export function ownEndpoints(config: Config, routes: RouteTable, deps: { ping: () => Promise<void>; tokenEndpoints: OwnHandler }): (ctx: GatewayContext) => OwnHandler | undefined {
  const exact = new Map<string, ExactEndpoint>([
    ['/healthz', { handler: healthz }],
    ['/readyz', { handler: readyz(deps.ping) }],
    ['/openapi.json', { methods: READ, handler: openApi(config) }],
  ]);
  const cors = corsLookup(routes, config.tokens.cors);
  return function findOwnEndpoint(ctx) {
    const path = ctx.path;
    const own = exact.get(path);
    if (own && (!own.methods || own.methods.has(ctx.method))) return own.handler;
    // The preflight, or the CORS headers every answer on this path will carry.
    const preflight = cors(ctx);
    if (preflight) return preflight;
    return isTokenPath(path) ? deps.tokenEndpoints : undefined;
  };
}
