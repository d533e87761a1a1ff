import { DomainError } from '../core/domain-error.js';

/**
 * How many password checks of one client address may run at once on this instance. A clean address (a
 * load balancer's, a NAT's) gets up to `wide` at once, so its users' sign-ins do not queue behind each
 * other; one that failed within `narrowForMs` gets one at a time, so each of its guesses sees the count
 * of the one before it. A guesser's first wave is thus at most `wide` checks, the burst the brute-force
 * policy allows an address anyway; from its first failure on, it is counted one by one.
 */
const MAX_IDLE_LANES = 10_000;
/** Checks of one address that may wait at once; past it the address is told to come back (429). */
export const MAX_WAITING = 64;

function tooManyWaiting(): DomainError {
  return new DomainError('too_many_attempts', 'too many sign-in attempts from this address at once; retry in 1 s', { retryAfterSeconds: 1 });
}

export class AddressLanes {
  private readonly lanes = new Map<string, { active: number; waiting: Array<() => void>; failedAt: number }>();
  private sweptAt = -Infinity;

  constructor(private readonly wide: number, private readonly narrowForMs: number, private readonly now: () => number = Date.now) {}

  async run<T>(address: string, work: () => Promise<T>): Promise<T> {
    if (this.lanes.size > MAX_IDLE_LANES && this.now() - this.sweptAt > 1000) this.sweep();
    let lane = this.lanes.get(address);
    if (!lane) this.lanes.set(address, (lane = { active: 0, waiting: [], failedAt: -Infinity }));
    const l = lane;
    while (l.active >= this.width(l.failedAt)) {
      // A flood from one address does not queue without end (nor keep bcrypt busy for clients long gone).
      if (l.waiting.length >= MAX_WAITING) throw tooManyWaiting();
      await new Promise<void>((resolve) => l.waiting.push(resolve));
    }
    l.active++;
    try {
      return await work();
    } finally {
      l.active--;
      const next = l.waiting.shift();
      if (next) next();
      else if (l.active === 0 && this.now() - l.failedAt > this.narrowForMs && this.lanes.get(address) === l) this.lanes.delete(address);
    }
  }

  /** A check from the address failed: one at a time for a while. */
  failed(address: string): void {
    const lane = this.lanes.get(address);
    if (lane) lane.failedAt = this.now();
  }

  /** Lanes kept only to remember a failure that is over by now go (many addresses guessing once each). */
  private sweep(): void {
    const now = this.now();
    this.sweptAt = now;
    for (const [address, l] of this.lanes) {
      if (l.active === 0 && l.waiting.length === 0 && now - l.failedAt > this.narrowForMs) this.lanes.delete(address);
    }
  }

  private width(failedAt: number): number {
    return this.now() - failedAt <= this.narrowForMs ? 1 : this.wide;
  }
}
