import { describe, expect, it } from 'vitest';
import { decisionOf, takesThatFit } from '../../src/stores/counters/gcra.js';

describe('GCRA decisions', () => {
  it('lets exactly `limit` takes into an idle bucket, also when the limit does not divide the period', () => {
    for (const [limit, period] of [[7, 60_000], [3, 1000], [10_000_000, 60_000], [1, 1000], [13, 3_600_000]] as const) {
      const interval = period / limit;
      expect(takesThatFit(0, interval, period, limit + 5)).toBe(limit);
      expect(decisionOf(limit - 1, limit, 0, interval, period)).toMatchObject({ allowed: true, remaining: 0 });
      expect(decisionOf(0, limit, 0, interval, period).remaining).toBe(limit - 1);
    }
    const interval = 60_000 / 7;
    expect(Array.from({ length: 7 }, (_, i) => decisionOf(i, 7, 0, interval, 60_000).resetSeconds)).toEqual([9, 18, 26, 35, 43, 52, 60]);
    expect(decisionOf(7, 7, 0, interval, 60_000)).toEqual({ allowed: false, remaining: 0, resetSeconds: 60, retryAfterSeconds: 9 });
  });

  it('decides a batch as it would decide its takes one at a time at the same instant', () => {
    let seed = 11;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let run = 0; run < 2000; run++) {
      const limit = 1 + Math.floor(next() * 50);
      const period = [1000, 60_000, 3_600_000][run % 3]!;
      const interval = period / limit;
      const ahead = Math.round(next() * period * 1.1 * 1000) / 1000;
      const n = 1 + Math.floor(next() * 60);
      const allowed = takesThatFit(ahead, interval, period, n);
      const batch = Array.from({ length: n }, (_, i) => decisionOf(i, allowed, ahead, interval, period));
      let position = ahead;
      const oneByOne = Array.from({ length: n }, () => {
        const fits = takesThatFit(position, interval, period, 1);
        const decision = decisionOf(0, fits, position, interval, period);
        if (fits) position += interval;
        return decision;
      });
      expect(batch).toEqual(oneByOne);
    }
  });

  it('refuses into a full bucket with the time until one more fits', () => {
    // 3 a second, the bucket a full second ahead: nothing fits; one fits in a third of a second.
    expect(takesThatFit(1000, 1000 / 3, 1000, 4)).toBe(0);
    expect(decisionOf(0, 0, 1000, 1000 / 3, 1000)).toEqual({ allowed: false, remaining: 0, resetSeconds: 1, retryAfterSeconds: 1 });
    expect(takesThatFit(800, 1000 / 3, 1000, 4)).toBe(0);
    expect(takesThatFit(600, 1000 / 3, 1000, 4)).toBe(1);
  });
});
