import type { RateDecision } from './counter-store.js';

/**
 * GCRA (the generic cell rate algorithm) of a bucket of `limit` requests per `period` ms, burst = limit:
 * a take moves the bucket's theoretical arrival time (TAT) on by `period / limit`, and is allowed while
 * the TAT stays within `period` of now. `ahead` is how far the TAT is ahead of now before a batch of takes
 * (0 for an idle bucket). The Redis script (TAKE_RATES) and the memory store decide how many fit with the
 * same arithmetic; the decisions of a batch follow from that count here. The small tolerance keeps a
 * period that the limit does not divide exactly (60 s / 7) from losing the last take to a rounding error.
 */
const TOLERANCE = 1e-6;

/** How many of `n` takes fit in a bucket that is `ahead` ms ahead: the first that many are allowed. */
export function takesThatFit(ahead: number, interval: number, period: number, n: number): number {
  return Math.max(0, Math.min(n, Math.floor((period - ahead) / interval + TOLERANCE)));
}

/** The decision on take `i` (from 0) of a batch whose first `allowed` takes were allowed. */
export function decisionOf(i: number, allowed: number, ahead: number, interval: number, period: number): RateDecision {
  if (i < allowed) {
    const after = ahead + (i + 1) * interval;
    return { allowed: true, remaining: Math.max(0, Math.floor((period - after) / interval + TOLERANCE)), resetSeconds: seconds(after), retryAfterSeconds: 0 };
  }
  const full = ahead + allowed * interval;
  // A refusal's wait is never rounded down to nothing: a client told to retry in 0 s would be refused again.
  return { allowed: false, remaining: 0, resetSeconds: seconds(full), retryAfterSeconds: Math.max(1, Math.ceil((full + interval - period) / 1000)) };
}

/** Whole seconds, rounded up, of a span in ms that may carry a rounding error. */
function seconds(ms: number): number {
  return Math.max(0, Math.ceil(ms / 1000 - TOLERANCE));
}
