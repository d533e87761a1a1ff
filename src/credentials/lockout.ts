import { createHash } from 'node:crypto';
import type { LockoutConfig } from '../config/types.js';
import { HttpProblem } from '../http/problem.js';
import type { Logger } from '../log.js';
import type { TokenStore } from '../tokens/store/types.js';

/**
 * Counts failed password checks per user name and per client address in the shared store. Past a
 * limit every check is refused with 429 until the window passes, the right password included.
 * When the store cannot answer, lockout fails open (logged once per outage): a Redis outage must not
 * lock every user out.
 */
export class Lockout {
  private failingOpen = false;

  constructor(private readonly store: TokenStore, private readonly config: LockoutConfig, private readonly log: Logger) {}

  async check(user: string, address: string): Promise<void> {
    const counters = await this.guard(() => Promise.all([this.store.peek(userKey(user)), this.store.peek(addressKey(address))]));
    if (!counters) return;
    const [byUser, byAddress] = counters;
    const locked = [
      byUser.count >= this.config.maxFailuresPerUser ? byUser.resetSeconds : 0,
      byAddress.count >= this.config.maxFailuresPerAddress ? byAddress.resetSeconds : 0,
    ];
    const retryAfter = Math.max(...locked);
    if (retryAfter > 0) {
      throw new HttpProblem(429, 'too_many_attempts', `too many failed sign-in attempts; retry in ${retryAfter} s`, {
        headers: { 'Retry-After': String(retryAfter) },
      });
    }
  }

  async fail(user: string, address: string): Promise<void> {
    const w = this.config.windowSeconds;
    await this.guard(() => Promise.all([this.store.hit(userKey(user), w), this.store.hit(addressKey(address), w)]));
  }

  private async guard<T>(op: () => Promise<T>): Promise<T | undefined> {
    try {
      const result = await op();
      this.failingOpen = false;
      return result;
    } catch (err) {
      if (!this.failingOpen) {
        this.failingOpen = true;
        this.log.warn('lockout counters unavailable; failing open until the store returns', { error: (err as Error).message });
      }
      return undefined;
    }
  }
}

// User names are client input of any length: key them by digest.
function userKey(user: string): string {
  return `lock:u:${createHash('sha256').update(user).digest('base64url')}`;
}

function addressKey(address: string): string {
  return `lock:a:${address}`;
}
