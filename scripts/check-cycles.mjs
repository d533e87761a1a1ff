// `npm run lint` (part of): no import cycles among the project's own modules. Every relative import
// counts, `import type` too: a type-only cycle still ties two modules' designs together.
// Plain JavaScript on the TypeScript compiler API, so it needs no build and no plugin.
import { dirname, relative, resolve } from 'node:path';
import { files, importsOf } from './imports.mjs';

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
const dirs = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['src'];

const all = dirs.flatMap((d) => files(resolve(root, d)));
const graph = new Map(all.map((f) => [f, importsOf(f).filter((t) => t !== f)]));
const state = new Map();
const stack = [];
const cycles = [];
function visit(file) {
  state.set(file, 'open');
  stack.push(file);
  for (const next of graph.get(file) ?? []) {
    if (!graph.has(next)) continue;
    if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next]);
    else if (!state.has(next)) visit(next);
  }
  stack.pop();
  state.set(file, 'done');
}
for (const file of graph.keys()) if (!state.has(file)) visit(file);

if (cycles.length > 0) {
  for (const c of cycles) console.error(`import cycle: ${c.map((f) => relative(root, f)).join(' → ')}`);
  process.exit(1);
}
console.log(`no import cycles among ${graph.size} modules (${dirs.join(', ')})`);
