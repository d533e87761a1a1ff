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
  return { text, warnings: site.warnings };
}
