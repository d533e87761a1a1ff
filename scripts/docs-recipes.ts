// `npm run docs:recipes`: writes the recipes of docs/front-proxy.md from docs/examples/front-door.yaml.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadRecipeConfig } from '../src/cli/config.js';
import { DOCS_EXAMPLE, DOCS_PAGE, renderRecipeBlocks } from '../src/recipes/docs.js';

const root = join(import.meta.dirname, '../..');
process.chdir(root);
const example = loadRecipeConfig(DOCS_EXAMPLE);
writeFileSync(join(root, DOCS_PAGE), renderRecipeBlocks(readFileSync(join(root, DOCS_PAGE), 'utf8'), example));
process.stdout.write(`wrote ${DOCS_PAGE}\n`);
