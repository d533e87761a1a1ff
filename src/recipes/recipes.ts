import type { Config } from '../config/types.js';
import { caddyRecipe } from './caddy.js';
import { ingressNginxRecipe } from './ingress-nginx.js';
import { nginxRecipe } from './nginx.js';
import { siteOf, type SiteOptions } from './site.js';
import { traefikRecipe } from './traefik.js';

export { RecipeError } from './site.js';

/** The front proxies a recipe is made for. */
export const RECIPE_KINDS = ['nginx', 'caddy', 'traefik', 'ingress-nginx'] as const;
export type RecipeKind = (typeof RECIPE_KINDS)[number];

/**
 * The configuration of a front proxy that fronts the whole site with forward-auth to this gateway, made
 * from the gateway's configuration (`auth-gateway recipe KIND`): its text, and warnings about settings
 * the proxy cannot honour as the gateway does. Throws RecipeError when no safe recipe can be made.
 */
export function recipe(kind: RecipeKind, config: Config, options: SiteOptions = {}, source = config.file): { text: string; warnings: string[] } {
  const site = siteOf(config, options);
  const routes = config.routes.map((r) => ({ path: r.path, upstream: r.upstream! }));
  const text = kind === 'nginx' ? nginxRecipe(site, source)
    : kind === 'caddy' ? caddyRecipe(site, source)
    : kind === 'traefik' ? traefikRecipe(site, source, routes)
    : ingressNginxRecipe(site, source, routes);
  return { text, warnings: [...site.warnings, ...http2Warnings(kind, config)] };
}

/**
 * Routes to HTTP/2 upstreams (gRPC): Caddy's recipe speaks HTTP/2 to them and carries gRPC, once its clients
 * reach it over HTTP/2 (a TLS site, or h2c in the operator's global options); the others pass HTTP/1.1,
 * which carries no gRPC.
 */
function http2Warnings(kind: RecipeKind, config: Config): string[] {
  const out: string[] = [];
  for (const route of config.routes) {
    const protocol = config.upstreams[route.upstream!]?.protocol;
    if (protocol !== 'h2c' && protocol !== 'h2') continue;
    out.push(kind === 'caddy'
      ? `routes: ${route.path} goes to upstreams.${route.upstream} over HTTP/2 (protocol: ${protocol}); gRPC clients must reach Caddy over HTTP/2 too: a TLS site, or \`servers { protocols h1 h2 h2c }\` in the global options for plain HTTP (docs/front-proxy.md)`
      : `routes: ${route.path} goes to upstreams.${route.upstream}, which speaks HTTP/2 (protocol: ${protocol}); the ${kind} recipe passes HTTP/1.1 to it, which carries no gRPC: serve gRPC routes through the gateway itself or through the Caddy recipe (docs/grpc.md)`);
  }
  return out;
}
