import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createMetrics, METRIC_PREFIX } from '../../src/admin/metrics.js';

// docs/operating.md's table of series is what an operator writes dashboards and alerts from: every
// series the gateway registers is a row, with its type and the labels it is declared with, and no row
// names a series that does not exist.

const OPERATING = readFileSync(join(import.meta.dirname, '../../docs/operating.md'), 'utf8');

interface Row { type: string; labels: string }
function tableRows(): Map<string, Row> {
  const rows = new Map<string, Row>();
  const section = OPERATING.slice(OPERATING.indexOf('## Admin listener and metrics'));
  for (const m of section.slice(0, section.indexOf('\n## ', 1)).matchAll(/^\| `([a-z0-9_]+)` \| ([a-z]+) \|([^|]*)\|/gm)) {
    rows.set(m[1]!, { type: m[2]!, labels: m[3]!.trim() });
  }
  return rows;
}

/** Every series of a fresh gateway's registry (without Node's process metrics, a row of their own). */
async function registered(): Promise<Array<{ name: string; type: string; labelNames: readonly string[] }>> {
  const { registry } = createMetrics();
  const json = await registry.getMetricsAsJSON();
  return json.map((m) => ({
    name: m.name.slice(METRIC_PREFIX.length),
    type: String(m.type),
    labelNames: (registry.getSingleMetric(m.name) as { labelNames?: readonly string[] } | undefined)?.labelNames ?? [],
  }));
}

describe('the metrics table of docs/operating.md', () => {
  it('has a row for every series, with its type and each label it is declared with', async () => {
    const rows = tableRows();
    const series = await registered();
    expect(series.length).toBeGreaterThan(15);
    for (const s of series) {
      const row = rows.get(s.name);
      expect(row, `${s.name} has no row`).toBeDefined();
      expect(row!.type, s.name).toBe(s.type);
      for (const label of s.labelNames) expect(row!.labels, `${s.name}: label ${label}`).toContain(`\`${label}\``);
    }
  });

  it('names no series the gateway does not have', async () => {
    const names = new Set((await registered()).map((s) => s.name));
    expect([...tableRows().keys()].filter((name) => !names.has(name))).toEqual([]);
  });

  it('lists every label of requests_total, which is counted without prom-client\'s label declaration', () => {
    const labels = tableRows().get('requests_total')!.labels;
    for (const label of ['route', 'method', 'status_class', 'auth', 'protocol']) expect(labels).toContain(`\`${label}\``);
    for (const via of ['basic', 'bearer', 'oidc', 'oidc-session', 'api_key', 'mtls', 'none']) expect(labels).toContain(`\`${via}\``);
  });
});
