import type { StoreLifecycle } from '../store-contracts.js';

/**
 * Counters that protect the gateway (lockout, rate limits): shared by every instance on one Redis.
 * Each method answers or throws StoreUnavailableError; callers fail OPEN on it (an outage of the
 * counters must not become an outage of sign-in or of the API), and the store logs that once per outage.
 */
export interface WindowCounters {
  /** Adds one to a counter that lives `windowSeconds` from its first hit. */
  hit(key: CounterKey, windowSeconds: number): Promise<Counter>;
  /** Reads a counter without changing it. */
  peek(key: CounterKey): Promise<Counter>;
  /** Forgets counters, and the rate buckets (RateBuckets.take) of the same names. */
  reset(...keys: CounterKey[]): Promise<void>;
  /**
   * Forgets every counter of a group (say, one user's locks from every address) whose window is at
   * most `windowSeconds`, including those this process never named.
   */
  resetGroup(group: string, windowSeconds: number): Promise<void>;
}

/** A counter on its own, or one of a group that resetGroup clears at once. */
export type CounterKey = string | { group: string; key: string };

export interface RateBuckets {
  /**
   * Takes one request from a GCRA bucket of `limit` requests per `windowSeconds` (burst = limit),
   * judged by the store's clock so every instance agrees.
   */
  take(key: string, limit: number, windowSeconds: number): Promise<RateDecision>;
}

/** What a backend implements: every role (the lockout takes both counter roles, the rate-limit step RateBuckets). */
export interface CounterStore extends WindowCounters, RateBuckets, StoreLifecycle {}

export interface Counter {
  count: number;
  /** Seconds until the counter resets; 0 when it does not exist. */
  resetSeconds: number;
}

export interface RateDecision {
  allowed: boolean;
  /** Requests left right now. */
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** When refused: seconds until one request is allowed. */
  retryAfterSeconds: number;
}
