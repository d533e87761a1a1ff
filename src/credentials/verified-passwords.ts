import { randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import { DomainError } from '../core/domain-error.js';
import { sha256 } from '../core/digest.js';

const MAX_ENTRIES = 10_000;

/**
 * What every password source (the htpasswd file, the directory) keeps about the checks it made: the
 * user:password pairs verified within the TTL, the check running for a pair (an identical attempt joins
 * it), and the bound on checks in progress (past it, 503 `verifications_busy`). A pair is known by a key
 * that holds no password: SHA-256 over a per-process secret, then each part with its length before it (so
 * no two attempts share a string); a secret-prefix MAC, safe here because only equality of keys is ever
 * used and nobody sees one. One call, no Buffers: the cached Basic path pays a third of an Hmac's cost.
 */
export class VerifiedPasswords {
  private readonly secret = randomBytes(32).toString('base64');
  private readonly verified = new Map<string, number>();
  private readonly running = new Map<string, Promise<boolean>>();
  private pending = 0;

  constructor(private readonly clock: Clock, private readonly ttlMs: number, private readonly maxPending: number) {}

  /** The key of user:password; `version` ties it to what the source holds now (the stored hash). */
  key(user: string, password: string, version = ''): string {
    return sha256(`${this.secret}${user.length}:${user}${password.length}:${password}${version}`);
  }

  /** True when the pair of this key was verified within the TTL. */
  has(key: string): boolean {
    const expiresAt = this.verified.get(key);
    if (expiresAt === undefined) return false;
    if (expiresAt > this.clock.now()) return true;
    this.verified.delete(key);
    return false;
  }

  /**
   * The verdict on the pair of this key: true at once when verified within the TTL, else the verdict of
   * the check running for it, else of `check` started now (as one of the bounded checks). A success is
   * remembered for the TTL.
   */
  verify(key: string, check: () => Promise<boolean>): Promise<boolean> {
    if (this.has(key)) return Promise.resolve(true);
    let running = this.running.get(key);
    if (!running) {
      running = this.checkAndRemember(key, check).finally(() => this.running.delete(key));
      this.running.set(key, running);
    }
    return running;
  }

  /** Runs `work` as one of at most maxPending checks in progress; past it, 503 `verifications_busy`. */
  async bounded<T>(work: () => Promise<T>): Promise<T> {
    if (this.pending >= this.maxPending) {
      throw new DomainError('verifications_busy', 'too many sign-in checks in progress; retry shortly', { retryAfterSeconds: 1 });
    }
    this.pending++;
    try {
      return await work();
    } finally {
      this.pending--;
    }
  }

  /** Checks in progress (a metric). */
  get pendingChecks(): number {
    return this.pending;
  }

  /** Forgets every verified pair (the users changed). */
  clear(): void {
    this.verified.clear();
  }

  private async checkAndRemember(key: string, check: () => Promise<boolean>): Promise<boolean> {
    const ok = await this.bounded(check);
    if (ok && this.ttlMs > 0) {
      if (this.verified.size >= MAX_ENTRIES) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(key, this.clock.now() + this.ttlMs);
    }
    return ok;
  }
}
