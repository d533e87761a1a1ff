// `npm run lint` (part of): imports run down the layers, never up. Each part of src/ (a folder, or a
// file at the top) is in one layer; it may import its own part and any part of a lower layer. Type-only
// imports count too: a type from above ties a lower part's design to a higher one.
// Plain JavaScript on the TypeScript compiler API, like check-cycles.mjs.
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { files, importsOf } from './imports.mjs';

/**
 * The layers, bottom up. A part is a folder of src/ (or `tokens/store`), or a file at src/'s top.
 * Within a layer parts may import each other only where the table's `within` allows it (a layer's
 * own order, bottom up, as listed).
 */
export const LAYERS = [
  { name: 'core', parts: ['core', 'clock.ts', 'log.ts'] },
  { name: 'configuration', parts: ['config'] },
  { name: 'tracing', parts: ['tracing'] },
  { name: 'stores', parts: ['tokens/store', 'counters', 'stores'] },
  { name: 'identity sources and policies', parts: ['identity', 'credentials', 'paging', 'authz', 'tokens', 'auth', 'routes'] },
  { name: 'forwarding and HTTP features', parts: ['proxy', 'http', 'admin'] },
  { name: 'pipeline', parts: ['pipeline'] },
  { name: 'front-proxy recipes', parts: ['recipes'] },
  { name: 'composition and CLI', parts: ['runtime.ts', 'server.ts', 'workers.ts', 'inspect.ts', 'cli', 'run.ts', 'main.ts'] },
];

/**
 * Domain code says why it refuses with a DomainError (src/core/domain-error.ts) and never picks an HTTP
 * status: these parts may not import the HTTP problem type. The HTTP layer's one table
 * (DOMAIN_ANSWERS in src/http/errors.ts) turns a domain code into status, challenge and detail.
 */
export const DOMAIN = ['tokens', 'tokens/store', 'credentials', 'counters', 'stores', 'proxy/pool.ts'];

/** The problems of the tree under `root` (its src/): each upward reference, each domain file that names the HTTP problem. */
export function checkLayers(root) {
  const src = join(root, 'src');
  const problem = join(src, 'core', 'problem.ts');
  /** The part of src/ a file belongs to. */
  const partOf = (file) => {
    const r = relative(src, file);
    if (r.startsWith('tokens/store/')) return 'tokens/store';
    const segments = r.split('/');
    return segments.length === 1 ? r : segments[0];
  };
  /** Rank of a part: layer, then position within the layer (a part may import parts listed before it). */
  const rank = new Map();
  LAYERS.forEach((layer, l) => layer.parts.forEach((part, p) => rank.set(part, [l, p])));
  const isDomain = (file) => {
    const r = relative(src, file);
    return DOMAIN.some((d) => r === d || r.startsWith(`${d}/`));
  };
  const problems = [];
  for (const file of files(src)) {
    const imports = importsOf(file);
    if (isDomain(file) && imports.includes(problem)) {
      problems.push(`${relative(root, file)} imports src/core/problem.ts: domain code throws a DomainError (src/core/domain-error.ts), the HTTP layer maps it`);
    }
    const from = partOf(file);
    const [fl, fp] = rank.get(from) ?? [-1, -1];
    if (fl < 0) {
      problems.push(`${relative(root, file)}: ${from} is in no layer (scripts/check-layers.mjs)`);
      continue;
    }
    for (const target of imports) {
      const to = partOf(target);
      if (to === from) continue;
      const [tl, tp] = rank.get(to) ?? [Infinity, Infinity];
      if (tl < fl || (tl === fl && tp < fp)) continue;
      problems.push(`${relative(root, file)} imports ${relative(root, target)}: ${from} (${LAYERS[fl].name}) may not import ${to}`);
    }
  }
  return problems;
}

/** The layer table of docs/pipeline-extension.md, as this check reads it (a test keeps the two equal). */
export function layerTable() {
  return [
    '| layer | parts of `src/` |',
    '|---|---|',
    ...LAYERS.map((l) => `| ${l.name} | ${l.parts.map((p) => `\`${p.endsWith('.ts') ? p : `${p}/`}\``).join(', ')} |`),
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const root = resolve(process.argv[2] ?? join(dirname(new URL(import.meta.url).pathname), '..'));
  const problems = checkLayers(root);
  if (problems.length > 0) {
    for (const p of problems) console.error(p);
    process.exit(1);
  }
  console.log(`imports follow the layers (${LAYERS.map((l) => l.parts.join(', ')).join(' < ')})`);
}
