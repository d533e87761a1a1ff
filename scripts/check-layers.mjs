// `npm run lint` (part of): imports run down the layers, never up. Each part of src/ (a folder, or a
// file at the top) is in one layer; it may import its own part and any part of a lower layer. Type-only
// imports count too: a type from above ties a lower part's design to a higher one.
// Plain JavaScript on the TypeScript compiler API, like check-cycles.mjs.
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { files, importsOf } from './imports.mjs';

/**
 * The layers, bottom up. A part is a folder of src/, a folder or file inside one that is listed on its
 * own (`http/problem.ts`: the longest listed part that holds a file is its part), or a
 * file at src/'s top. Within a layer parts may import each other only in the layer's own order, bottom
 * up, as listed.
 */
export const LAYERS = [
  { name: 'core', parts: ['core', 'clock.ts', 'log.ts'] },
  { name: 'configuration', parts: ['config'] },
  { name: 'tracing', parts: ['tracing'] },
  // What every store shares, then the Redis plumbing, then the backends (none imports another listed
  // after it), then the rest of stores/ (kinds.ts, which makes each kind's backends).
  { name: 'stores', parts: ['stores/store-contracts.ts', 'stores/listeners.ts', 'stores/redis', 'stores/sessions', 'stores/counters', 'stores/tables', 'stores'] },
  { name: 'identity sources and policies', parts: ['identity', 'credentials', 'paging', 'authz', 'tokens', 'auth', 'routes'] },
  { name: 'forwarding and HTTP features', parts: ['http/problem.ts', 'proxy', 'http', 'admin'] },
  { name: 'pipeline', parts: ['pipeline'] },
  { name: 'front-proxy recipes', parts: ['recipes'] },
  { name: 'composition and CLI', parts: ['runtime.ts', 'server.ts', 'workers.ts', 'inspect.ts', 'cli', 'run.ts', 'main.ts'] },
];

/**
 * The HTTP problem module (HttpProblem, its body, its one writer): the bottom of the HTTP edge, where
 * statuses are chosen. The forwarders (`proxy/`) write their own 502/504 with it, so it is a part of
 * its own, listed before them.
 */
const HTTP_PROBLEM = 'http/problem.ts';

/**
 * Domain code says why it refuses with a DomainError (src/core/domain-error.ts) and never picks an HTTP
 * status: every part below the HTTP edge (each layer under the problem module's), and the upstream
 * pools (`proxy/pool.ts`), may not import the HTTP problem module. The HTTP layer's one table
 * (DOMAIN_ANSWERS in src/http/errors.ts) turns a domain code into status, challenge and detail.
 */
export const DOMAIN = [
  ...LAYERS.slice(0, LAYERS.findIndex((l) => l.parts.includes(HTTP_PROBLEM))).flatMap((l) => l.parts),
  'proxy/pool.ts',
];

/** The problems of the tree under `root` (its src/): each upward reference, each domain file that names the HTTP problem. */
export function checkLayers(root) {
  const src = join(root, 'src');
  const problem = join(src, HTTP_PROBLEM);
  const listed = LAYERS.flatMap((l) => l.parts);
  /** The part of src/ a file belongs to: the longest listed part that holds it, else its top folder (or itself). */
  const partOf = (file) => {
    const r = relative(src, file);
    let part;
    for (const p of listed) if ((r === p || r.startsWith(`${p}/`)) && (part === undefined || p.length > part.length)) part = p;
    return part ?? r.split('/')[0];
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
    const domain = isDomain(file);
    if (domain && imports.includes(problem)) {
      problems.push(`${relative(root, file)} imports src/${HTTP_PROBLEM}: domain code throws a DomainError (src/core/domain-error.ts), the HTTP layer's DOMAIN_ANSWERS (src/http/errors.ts) answers it`);
    }
    const from = partOf(file);
    const [fl, fp] = rank.get(from) ?? [-1, -1];
    if (fl < 0) {
      problems.push(`${relative(root, file)}: ${from} is in no layer (scripts/check-layers.mjs)`);
      continue;
    }
    for (const target of imports) {
      if (domain && target === problem) continue; // said above
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
