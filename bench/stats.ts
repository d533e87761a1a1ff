/** What every load child prints (one JSON line on stdout). Latencies in milliseconds. */
export interface LoadResult {
  /** Responses received, any status. */
  total: number;
  /** 2xx responses. */
  ok: number;
  durationS: number;
  /** 2xx responses per second. */
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Mean latency, when the load generator reports it (wrk). */
  mean?: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
}

/** Response times, kept exactly (autocannon's own histogram floors to whole milliseconds). */
export class Samples {
  private data = new Float64Array(1 << 16);
  private n = 0;

  push(ms: number): void {
    if (this.n === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.n++] = ms;
  }

  get count(): number {
    return this.n;
  }

  /** p50, p90, p99, max of what was pushed (0 when empty). */
  percentiles(): { p50: number; p90: number; p99: number; max: number } {
    const sorted = this.data.slice(0, this.n).sort();
    const at = (q: number) => (this.n === 0 ? 0 : sorted[Math.min(this.n - 1, Math.ceil(q * this.n) - 1)]!);
    return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: this.n === 0 ? 0 : sorted[this.n - 1]! };
  }
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
