import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkLayers, DOMAIN, layerTable } from '../../scripts/check-layers.mjs';

/**
 * The layer check (`npm run lint`) against trees made for it: each way a low layer can name a high one
 * must be caught, wherever in the syntax it is written; a tree that follows the layers passes.
 */
const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'gw-layers-'));
  roots.push(root);
  const all = { 'src/server.ts': 'export interface Gateway { x: number }\nexport const gateway = 1;\n', 'src/http/problem.ts': 'export class HttpProblem {}\n', ...files };
  for (const [path, text] of Object.entries(all)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe('the layer check', () => {
  it.each([
    ['a static import', "import { gateway } from '../server.js';\nexport const y = gateway;\n"],
    ['a type-only import', "import type { Gateway } from '../server.js';\nexport type Y = Gateway;\n"],
    ['a re-export', "export * from '../server.js';\n"],
    ['a named re-export', "export { gateway } from '../server.js';\n"],
    ['a dynamic import', "export async function later() { return (await import('../server.js')).gateway; }\n"],
    ['an import type in a type position', "export type Y = import('../server.js').Gateway;\n"],
    ['an import type deep in a signature', "export function f(g: Array<{ inner: import('../server.js').Gateway }>): void { void g; }\n"],
    ['import = require', "import server = require('../server.js');\nexport const y = server;\n"],
    ['a require call', "declare const require: (s: string) => unknown;\nexport const y = require('../server.js');\n"],
  ])('fails on %s upward', (_, text) => {
    const problems = checkLayers(tree({ 'src/core/low.ts': text }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^src\/core\/low\.ts imports src\/server\.ts: core \(core\) may not import server\.ts$/);
  });

  it('fails on the Redis plumbing or a shared store file that imports a backend, and on a backend that imports one listed after it', () => {
    const problems = checkLayers(tree({
      'src/stores/sessions/session-store.ts': 'export interface Sessions { x: number }\n',
      'src/stores/tables/shared-table.ts': 'export const t = 1;\n',
      'src/stores/redis/replication.ts': "import type { Sessions } from '../sessions/session-store.js';\nexport type S = Sessions;\n",
      'src/stores/store-contracts.ts': "export type R = import('./redis/replication.js').S;\n",
      'src/stores/counters/redis-counters.ts': "export const c = import('../tables/shared-table.js');\n",
      'src/stores/kinds.ts': "import { t } from './tables/shared-table.js';\nimport type { Sessions } from './sessions/session-store.js';\nexport const k: Sessions = { x: t };\n",
    }));
    expect(problems).toEqual([
      'src/stores/counters/redis-counters.ts imports src/stores/tables/shared-table.ts: stores/counters (stores) may not import stores/tables',
      'src/stores/redis/replication.ts imports src/stores/sessions/session-store.ts: stores/redis (stores) may not import stores/sessions',
      'src/stores/store-contracts.ts imports src/stores/redis/replication.ts: stores/store-contracts.ts (stores) may not import stores/redis',
    ]);
  });

  it('fails on domain code that names the HTTP problem, and on a part in no layer', () => {
    const problems = checkLayers(tree({
      'src/tokens/service.ts': "import { HttpProblem } from '../http/problem.js';\nexport const p = HttpProblem;\n",
      'src/elsewhere/x.ts': 'export const x = 1;\n',
    }));
    expect(problems.join('\n')).toMatch(/src\/tokens\/service\.ts imports src\/http\/problem\.ts: domain code throws a DomainError/);
    expect(problems.join('\n')).toMatch(/src\/elsewhere\/x\.ts: elsewhere is in no layer/);
  });

  it.each([
    ['src/auth/basic.ts', "import { HttpProblem } from '../http/problem.js';\nexport const p = HttpProblem;\n"],
    ['src/authz/forward-auth-request.ts', "import type { HttpProblem } from '../http/problem.js';\nexport type P = HttpProblem;\n"],
    ['src/paging/normalize.ts', "export async function refuse() { return (await import('../http/problem.js')).HttpProblem; }\n"],
    ['src/identity/issuers.ts', "export type P = import('../http/problem.js').HttpProblem;\n"],
    ['src/core/path.ts', "export { HttpProblem } from '../http/problem.js';\n"],
    ['src/config/validate.ts', "import { HttpProblem } from '../http/problem.js';\nexport const p = HttpProblem;\n"],
    ['src/credentials/password-check.ts', "import { HttpProblem } from '../http/problem.js';\nexport const p = HttpProblem;\n"],
    ['src/stores/tables/api-keys.ts', "import { HttpProblem } from '../../http/problem.js';\nexport const p = HttpProblem;\n"],
    ['src/stores/sessions/redis-session-store.ts', "import { HttpProblem } from '../../http/problem.js';\nexport const p = HttpProblem;\n"],
    ['src/stores/counters/redis-counters.ts', "import { HttpProblem } from '../../http/problem.js';\nexport const p = HttpProblem;\n"],
    ['src/proxy/pool.ts', "import { HttpProblem } from '../http/problem.js';\nexport const p = HttpProblem;\n"],
  ])('fails on a domain part that imports the HTTP problem module: %s', (file, text) => {
    const problems = checkLayers(tree({ [file]: text }));
    expect(problems).toEqual([`${file} imports src/http/problem.ts: domain code throws a DomainError (src/core/domain-error.ts), the HTTP layer's DOMAIN_ANSWERS (src/http/errors.ts) answers it`]);
  });

  it('lets the forwarders build HTTP problems, but not import the rest of the HTTP layer', () => {
    expect(checkLayers(tree({
      'src/proxy/forward.ts': "import { HttpProblem } from '../http/problem.js';\nexport const p = HttpProblem;\n",
      'src/http/errors.ts': "import { HttpProblem } from './problem.js';\nexport const p = HttpProblem;\n",
      'src/pipeline/run.ts': "import { HttpProblem } from '../http/problem.js';\nexport const p = HttpProblem;\n",
    }))).toEqual([]);
    expect(checkLayers(tree({
      'src/http/errors.ts': 'export const toProblem = 1;\n',
      'src/proxy/forward.ts': "import { toProblem } from '../http/errors.js';\nexport const p = toProblem;\n",
      'src/http/problem.ts': "import { toProblem } from './errors.js';\nexport const p = toProblem;\n",
    }))).toEqual([
      'src/http/problem.ts imports src/http/errors.ts: http/problem.ts (forwarding and HTTP features) may not import http',
      'src/proxy/forward.ts imports src/http/errors.ts: proxy (forwarding and HTTP features) may not import http',
    ]);
  });

  it('counts every part below the HTTP edge, and the upstream pools, as domain code', () => {
    for (const part of ['core', 'config', 'credentials', 'tokens', 'stores', 'identity', 'auth', 'authz', 'paging', 'proxy/pool.ts']) {
      expect(DOMAIN).toContain(part);
    }
    for (const part of ['http', 'http/problem.ts', 'proxy', 'admin', 'pipeline', 'recipes', 'runtime.ts', 'server.ts']) expect(DOMAIN).not.toContain(part);
  });

  it('passes a tree whose imports run down, and the project\'s own src/', () => {
    expect(checkLayers(tree({ 'src/core/low.ts': 'export const low = 1;\n', 'src/http/mid.ts': "import { low } from '../core/low.js';\nexport const mid = import('../core/low.js').then(() => low);\n" }))).toEqual([]);
    expect(checkLayers(join(import.meta.dirname, '../..'))).toEqual([]);
  });

  it('its table is the one docs/pipeline-extension.md prints', () => {
    const doc = readFileSync(join(import.meta.dirname, '../../docs/pipeline-extension.md'), 'utf8');
    expect(doc).toContain(`\n${layerTable()}\n`);
  });
});
