import type { Registry } from 'prom-client';

/** One labelled series of a counter, counted in a plain number. */
interface CountCell {
  readonly labels: Record<string, string>;
  n: number;
}

/** One labelled series of a histogram: counts per bucket (not cumulative), sum and count. */
interface HistogramCell {
  readonly labels: Record<string, string>;
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * A counter kept in plain numbers on the request path and handed to prom-client when /metrics is
 * scraped: counting a request is a Map lookup by a caller-made key and an increment, with none of
 * prom-client's per-call label hashing. The exported series are the ones a prom-client Counter with the
 * same name, help and labels would export (also to the workers' aggregation, summed).
 */
export class TallyCounter {
  private readonly cells = new Map<string, CountCell>();

  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[], registry: Registry) {
    registry.registerMetric(this as never);
  }

  /** Adds one to the series `key` names; false when there is no such series yet (see add). */
  inc(key: string): boolean {
    const cell = this.cells.get(key);
    if (cell === undefined) return false;
    cell.n++;
    return true;
  }

  /** Starts the series `key` names, with its labels, at one. */
  add(key: string, labels: Record<string, string>): void {
    this.cells.set(key, { labels, n: 1 });
  }

  readonly type = 'counter';
  readonly aggregator = 'sum';

  get(): { name: string; help: string; type: string; aggregator: string; values: Array<{ labels: Record<string, string>; value: number }> } {
    const values = [...this.cells.values()].map((c) => ({ labels: c.labels, value: c.n }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

/** A histogram kept in plain numbers, exported like a prom-client Histogram of the same name (see TallyCounter). */
export class TallyHistogram {
  private readonly cells = new Map<string, HistogramCell>();

  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[], private readonly upperBounds: readonly number[], registry: Registry) {
    registry.registerMetric(this as never);
  }

  /** Counts `value` in the series `key` names; false when there is no such series yet (see add). */
  observe(key: string, value: number): boolean {
    const cell = this.cells.get(key);
    if (cell === undefined) return false;
    this.count(cell, value);
    return true;
  }

  /** Starts the series `key` names, with its labels, with `value`. */
  add(key: string, labels: Record<string, string>, value: number): void {
    const cell = { labels, buckets: new Float64Array(this.upperBounds.length), sum: 0, count: 0 };
    this.cells.set(key, cell);
    this.count(cell, value);
  }

  private count(cell: HistogramCell, value: number): void {
    const bounds = this.upperBounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        cell.buckets[i]!++;
        break;
      }
    }
    cell.sum += value;
    cell.count++;
  }

  readonly type = 'histogram';
  readonly aggregator = 'sum';

  get(): { name: string; help: string; type: string; aggregator: string; values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> } {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const cell of this.cells.values()) {
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += cell.buckets[i]!;
        values.push({ labels: { ...cell.labels, le }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { ...cell.labels, le: '+Inf' }, value: cell.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { ...cell.labels }, value: cell.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...cell.labels }, value: cell.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
