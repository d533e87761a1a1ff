import type { Clock } from '../../clock.js';
import { decisionOf, takesThatFit } from './gcra.js';
import type { Counter, CounterKey, CounterStore, RateDecision } from './counter-store.js';

interface StoredCounter {
  count: number;
  startedAt: number;
  expiresAt: number;
  group: string | undefined;
}

const SWEEP_INTERVAL_MS = 60_000;

/** One process's counters (the embedded default); same semantics as the Redis scripts. */
export class MemoryCounters implements CounterStore {
  readonly kind = 'memory';
  private readonly counters = new Map<string, StoredCounter>();
  /** GCRA buckets: key -> theoretical arrival time (ms). */
  private readonly buckets = new Map<string, number>();
  /** group -> when it was last cleared (ms) and until when that matters. */
  private readonly cleared = new Map<string, { at: number; until: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly clock: Clock) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  async hit(key: CounterKey, windowSeconds: number): Promise<Counter> {
    const now = this.clock.now();
    let counter = this.live(key, now);
    if (!counter) {
      counter = { count: 0, startedAt: now, expiresAt: now + windowSeconds * 1000, group: typeof key === 'string' ? undefined : key.group };
      this.counters.set(id(key), counter);
    }
    counter.count += 1;
    return { count: counter.count, resetSeconds: Math.ceil((counter.expiresAt - now) / 1000) };
  }

  async peek(key: CounterKey): Promise<Counter> {
    const now = this.clock.now();
    const counter = this.live(key, now);
    if (!counter) return { count: 0, resetSeconds: 0 };
    return { count: counter.count, resetSeconds: Math.ceil((counter.expiresAt - now) / 1000) };
  }

  async reset(...keys: CounterKey[]): Promise<void> {
    for (const key of keys) {
      this.counters.delete(id(key));
      if (typeof key === 'string') this.buckets.delete(key);
    }
  }

  async resetGroup(group: string, windowSeconds: number): Promise<void> {
    const now = this.clock.now();
    this.cleared.set(group, { at: now, until: now + windowSeconds * 1000 });
  }

  async take(key: string, limit: number, windowSeconds: number): Promise<RateDecision> {
    const now = this.clock.now();
    const period = windowSeconds * 1000;
    const interval = period / limit;
    const ahead = Math.max(this.buckets.get(key) ?? 0, now) - now;
    const allowed = takesThatFit(ahead, interval, period, 1);
    if (allowed > 0) this.buckets.set(key, now + ahead + interval);
    return decisionOf(0, allowed, ahead, interval, period);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }

  private live(key: CounterKey, now: number): StoredCounter | undefined {
    const counter = this.counters.get(id(key));
    const cleared = counter?.group === undefined ? undefined : this.cleared.get(counter.group);
    if (counter && (counter.expiresAt <= now || (cleared !== undefined && cleared.at >= counter.startedAt))) {
      this.counters.delete(id(key));
      return undefined;
    }
    return counter;
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const [key, c] of this.counters) if (c.expiresAt <= now) this.counters.delete(key);
    for (const [key, tat] of this.buckets) if (tat <= now) this.buckets.delete(key);
    for (const [group, c] of this.cleared) if (c.until <= now) this.cleared.delete(group);
  }
}

function id(key: CounterKey): string {
  return typeof key === 'string' ? key : `${key.group}\0${key.key}`;
}
