import { sha256 } from '../core/digest.js';
import type { LockoutConfig } from '../config/types.js';
import { DomainError } from '../core/domain-error.js';
import type { Logger } from '../log.js';
import type { Counter, RateBuckets, WindowCounters } from '../stores/counters/counter-store.js';

/** What `check` read, so that `fail` and `succeed` need not read it again. */
export interface Standing {
  pair: Counter | undefined;
  account: Counter | undefined;
}

/**
 * The note of one user's pair with an address (see Lockout.checkPair), kept by a caller that checks the
 * same user again and again (Basic on a keep-alive connection): made again only when the address changes
 * (behind trusted proxies one connection carries many clients). It belongs to one user name.
 */
export interface PairNoteMemo {
  note: string | undefined;
  noteAddress: string | undefined;
}

/**
 * The brute-force policy, in the shared store so every instance applies it together:
 * - one user name from one address: `maxFailuresPerUser` failures within the window, then that pair gets
 *   429 until the window ends, the right password included, also one verified moments ago (the same user
 *   from another address is not affected);
 * - one user name from all addresses: `maxFailuresPerAccount` consecutive failures (a success starts the
 *   count again; NIST SP 800-63B caps it at 100), then 429 for everyone until the window ends or an operator
 *   clears it, except clients whose password was verified moments ago (see PasswordCheck);
 * - one address, whatever user names it tries: failures drain a bucket of `addressBurst` that refills at
 *   `addressFailuresPerMinute`; while it is empty the address gets 429 with a Retry-After of a few seconds.
 *   Its guessing is slowed, but its users (a shared NAT, a load balancer without trustProxy) are never
 *   locked out: a correct password gets in as soon as the next check is allowed.
 * Every counter fails open on its own when the store cannot answer (the counter store logs that once per
 * outage): an outage of the counters must not become an outage of sign-in. Each decision is logged once, with the user and the
 * address, never the password.
 */
export class Lockout {
  private readonly bucketWindowSeconds: number;
  /**
   * user+address -> when this instance last saw that pair's count in the store below the limit, with no
   * failure of the pair on this instance since. A cached Basic password checks the pair's lock against
   * the store only when this note is missing or older than PAIR_RECHECK_MS (see checkPair).
   */
  private readonly clearPairs = new Map<string, number>();

  constructor(
    /** The window counters (pair, account, throttle) and the address's bucket. */
    private readonly store: WindowCounters & RateBuckets,
    private readonly config: LockoutConfig,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    // GCRA of `addressBurst` per window: the burst, then one check per (window / burst) seconds.
    this.bucketWindowSeconds = Math.max(1, Math.round((config.addressBurst * 60) / config.addressFailuresPerMinute));
  }

  /**
   * Before a password is judged: 429 when the pair, the account or the address is held back. When more
   * than one holds it back, the answer names the longest, and its Retry-After is that hold's remaining
   * time: a retry any sooner would be refused again.
   */
  async check(user: string, address: string): Promise<Standing> {
    const [pair, account, throttle] = await Promise.all([
      this.guard(() => this.store.peek(pairKey(user, address))),
      this.guard(() => this.store.peek(accountKey(user))),
      this.guard(() => this.store.peek(throttleKey(address))),
    ]);
    this.notePair(user, address, pair);
    const holds: Array<[seconds: number, why: string]> = [];
    if (throttle && throttle.resetSeconds > 0) holds.push([throttle.resetSeconds, 'too many failed sign-in attempts from this address']);
    if (pair && pair.count >= this.config.maxFailuresPerUser) holds.push([pair.resetSeconds, PAIR_LOCKED]);
    if (account && account.count >= this.config.maxFailuresPerAccount) holds.push([account.resetSeconds, 'too many failed sign-in attempts for this user']);
    if (holds.length > 0) {
      const [seconds, why] = holds.reduce((a, b) => (b[0] > a[0] ? b : a));
      throw tooMany(seconds, why);
    }
    return { pair, account };
  }

  /**
   * For a password verified moments ago (cached Basic): only the lock of this user from this address,
   * the right password included. It reads the store when this instance saw a failure of the pair since
   * its last read, when the pair is locked, or when its last read is over PAIR_RECHECK_MS old; otherwise
   * it costs a map lookup. So a lock this instance counted holds at once, and a lock counted by another
   * instance (or lifted by an operator) holds within PAIR_RECHECK_MS. `memo`: the note of this user's
   * pair, kept by the caller (see PairNoteMemo).
   */
  checkPair(user: string, address: string, memo?: PairNoteMemo): void | Promise<void> {
    let note: string;
    if (memo === undefined) note = pairNote(user, address);
    else {
      if (memo.note === undefined || memo.noteAddress !== address) {
        memo.note = pairNote(user, address);
        memo.noteAddress = address;
      }
      note = memo.note;
    }
    const seenAt = this.clearPairs.get(note);
    if (seenAt !== undefined && this.now() - seenAt < PAIR_RECHECK_MS) return undefined;
    return this.readPair(user, address);
  }

  private async readPair(user: string, address: string): Promise<void> {
    const pair = await this.guard(() => this.store.peek(pairKey(user, address)));
    this.notePair(user, address, pair);
    if (pair && pair.count >= this.config.maxFailuresPerUser) throw tooMany(pair.resetSeconds, PAIR_LOCKED);
  }

  /** A wrong password (or unknown user): counts toward all three limits. */
  async fail(user: string, address: string): Promise<void> {
    this.clearPairs.delete(pairNote(user, address));
    const w = this.config.windowSeconds;
    const [pair, account, bucket] = await Promise.all([
      this.guard(() => this.store.hit(pairKey(user, address), w)),
      this.guard(() => this.store.hit(accountKey(user), w)),
      this.guard(() => this.store.take(bucketKey(address), this.config.addressBurst, this.bucketWindowSeconds)),
    ]);
    const who = { user: user.slice(0, 128), address };
    if (pair?.count === this.config.maxFailuresPerUser) {
      this.log.warn('sign-in locked for this user from this address', { event: 'lockout', scope: 'user+address', ...who, failures: pair.count, retryAfterSeconds: pair.resetSeconds });
    }
    if (account?.count === this.config.maxFailuresPerAccount) {
      this.log.warn('sign-in locked for this user from every address', { event: 'lockout', scope: 'account', ...who, failures: account.count, retryAfterSeconds: account.resetSeconds });
    }
    if (bucket && (!bucket.allowed || bucket.remaining === 0)) {
      // The bucket is empty: hold the address back until its next check is allowed.
      const retryAfterSeconds = bucket.allowed ? Math.ceil(this.bucketWindowSeconds / this.config.addressBurst) : bucket.retryAfterSeconds;
      await this.guard(() => this.store.hit(throttleKey(address), Math.max(1, retryAfterSeconds)));
      this.log.warn('sign-in attempts from this address slowed down', { event: 'throttle', scope: 'address', ...who, retryAfterSeconds });
    }
  }

  /** A correct password: the failures before it were not consecutive any more. */
  async succeed(user: string, address: string, standing: Standing): Promise<void> {
    await Promise.all([
      standing.pair?.count ? this.guard(() => this.store.reset(pairKey(user, address))) : undefined,
      standing.account?.count ? this.guard(() => this.store.reset(accountKey(user))) : undefined,
    ]);
  }

  /**
   * Lifts what an operator names: a user's account lock and its locks from every address; an address's
   * throttle and bucket; both: all of that.
   */
  async clear(target: { user?: string; address?: string }): Promise<void> {
    const { user, address } = target;
    await Promise.all([
      user !== undefined ? this.store.reset(accountKey(user)) : undefined,
      user !== undefined ? this.store.resetGroup(userGroup(user), this.config.windowSeconds) : undefined,
      address !== undefined ? this.store.reset(throttleKey(address), bucketKey(address)) : undefined,
    ]);
  }

  /** Notes a pair read below its limit (see checkPair); a locked or unread pair is read again next time. */
  private notePair(user: string, address: string, pair: Counter | undefined): void {
    const note = pairNote(user, address);
    this.clearPairs.delete(note);
    if (!pair || pair.count >= this.config.maxFailuresPerUser) return;
    if (this.clearPairs.size >= MAX_PAIR_NOTES) this.clearPairs.delete(this.clearPairs.keys().next().value!);
    this.clearPairs.set(note, this.now());
  }

  /** The counter store logs its outage once; here a failed read or write just does not count. */
  private async guard<T>(op: () => Promise<T>): Promise<T | undefined> {
    try {
      return await op();
    } catch {
      return undefined;
    }
  }
}

/** How old a note of a clear pair may be before a cached Basic password reads the pair's lock again. */
export const PAIR_RECHECK_MS = 1000;
const MAX_PAIR_NOTES = 10_000;
const PLAIN_NOTE_MAX = 128;
const PAIR_LOCKED = 'too many failed sign-in attempts for this user from this address';

function tooMany(retryAfter: number, why: string): DomainError {
  const seconds = Math.max(1, retryAfter);
  return new DomainError('too_many_attempts', `${why}; retry in ${seconds} s`, { retryAfterSeconds: seconds });
}

// User names are client input of any length: key them by digest (length-prefixed, so no pair collides).
function digest(...parts: string[]): string {
  // The same digest as ever (byte length, colon, part; base64url): the keys already in the store stay theirs.
  let text = '';
  for (const p of parts) text += `${Buffer.byteLength(p)}:${p}`;
  return sha256(text);
}

/** Every address lock of one user is in the user's group, so `lockout clear --user` lifts them all. */
function pairKey(user: string, address: string): { group: string; key: string } {
  return { group: userGroup(user), key: `p:${digest(address)}` };
}

/**
 * The in-memory note of a pair (never a store key): the user and address themselves for the user names
 * people have (no SHA-256 on every cached Basic request), a digest for a long one, so the notes stay
 * small. A digest has no colon, the plain form always has one: the two never meet.
 */
function pairNote(user: string, address: string): string {
  return user.length <= PLAIN_NOTE_MAX ? `${user.length}:${user}${address}` : digest(user, address);
}

function userGroup(user: string): string {
  return `lock:g:${digest(user)}`;
}

function accountKey(user: string): string {
  return `lock:u:${digest(user)}`;
}

function throttleKey(address: string): string {
  return `lock:t:${address}`;
}

function bucketKey(address: string): string {
  return `lock:a:${address}`;
}
