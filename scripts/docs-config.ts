// `npm run docs:config`: writes docs/configuration.md from the settings table (src/config/defaults.ts).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REFERENCE_FILE, renderReference } from '../src/config/reference.js';

const root = join(import.meta.dirname, '../..');
writeFileSync(join(root, REFERENCE_FILE), renderReference());
process.stdout.write(`wrote ${REFERENCE_FILE}\n`);
