import { createMetrics, METRIC_PREFIX } from './metrics.js';

/** The document whose metric table is generated, relative to the repository root. */
export const METRICS_DOC = 'docs/operating.md';
const BEGIN = '<!-- metrics: generated from the registry (src/admin/metrics.ts) by `npm run docs:metrics`; do not edit by hand (a test compares the two). -->';
const END = '<!-- end of generated metrics -->';

/** What a registered metric says of itself (prom-client's metrics and the tallies alike). */
interface Described {
  name: string;
  help: string;
  type: string;
  labelNames?: readonly string[];
}

/**
 * The metric table of docs/operating.md, from a registry as the gateway builds it: every series of its
 * own (name, type, labels, help), then the default process metrics it adds under their standard names.
 */
export function renderMetricsTable(): string {
  const metrics = createMetrics();
  metrics.collectProcessMetrics();
  const all = metrics.registry.getMetricsAsArray() as unknown as Described[];
  const own = all.filter((m) => m.name.startsWith(METRIC_PREFIX)).sort((a, b) => a.name.localeCompare(b.name));
  const standard = all.filter((m) => !m.name.startsWith(METRIC_PREFIX)).map((m) => `\`${m.name}\``).sort();
  const rows = own.map((m) => `| \`${m.name}\` | ${m.type} | ${(m.labelNames ?? []).map((l) => `\`${l}\``).join(', ')} | ${cell(m.help)} |`);
  return [
    BEGIN,
    '',
    '| series | type | labels | help |',
    '|---|---|---|---|',
    ...rows,
    '',
    `Process and runtime metrics (prom-client's defaults, under the names standard Node.js dashboards read): ${standard.join(', ')}.`,
    '',
    END,
  ].join('\n');
}

/** The document with its generated part replaced by `table`; throws when the markers are missing. */
export function withMetricsTable(doc: string, table: string = renderMetricsTable()): string {
  const from = doc.indexOf(BEGIN);
  const to = doc.indexOf(END);
  if (from < 0 || to < from) throw new Error(`${METRICS_DOC} has no generated metrics part (${BEGIN} … ${END})`);
  return doc.slice(0, from) + table + doc.slice(to + END.length);
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}
