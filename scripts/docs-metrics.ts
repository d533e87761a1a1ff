// `npm run docs:metrics`: writes the metric table of docs/operating.md from the registry (src/admin/metrics.ts).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { METRICS_DOC, withMetricsTable } from '../src/admin/metrics-reference.js';

const root = join(import.meta.dirname, '../..');
const file = join(root, METRICS_DOC);
writeFileSync(file, withMetricsTable(readFileSync(file, 'utf8')));
process.stdout.write(`wrote the metrics table of ${METRICS_DOC}\n`);
process.exit(0);
