import { RECIPE_KINDS, recipe, type RecipeKind } from './recipes.js';
import type { Config } from '../config/types.js';

/** The example configuration the front-proxy page's recipes are made from, and what the page calls it. */
export const DOCS_EXAMPLE = 'docs/examples/front-door.yaml';
export const DOCS_PAGE = 'docs/front-proxy.md';

const FENCE: Record<RecipeKind, string> = { nginx: 'nginx', caddy: 'caddyfile', traefik: 'yaml', 'ingress-nginx': 'yaml' };

/**
 * docs/front-proxy.md with each generated block (between `<!-- recipe KIND -->` and `<!-- /recipe -->`)
 * made anew from the example configuration: what `npm run docs:recipes` writes and a test compares.
 */
export function renderRecipeBlocks(page: string, example: Config): string {
  let out = page;
  for (const kind of RECIPE_KINDS) {
    const open = `<!-- recipe ${kind} -->`;
    const start = out.indexOf(open);
    const end = out.indexOf('<!-- /recipe -->', start);
    if (start < 0 || end < 0) throw new Error(`${DOCS_PAGE} has no ${open} … <!-- /recipe --> block`);
    const text = recipe(kind, example, { listen: ':80', gateway: 'http://127.0.0.1:8080' }, DOCS_EXAMPLE).text;
    out = `${out.slice(0, start)}${open}\n\`\`\`${FENCE[kind]}\n${text.trimEnd()}\n\`\`\`\n${out.slice(end)}`;
  }
  return out;
}
