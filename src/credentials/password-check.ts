import { DomainError } from '../core/domain-error.js';
import { AddressLanes } from './address-lanes.js';
import type { Lockout, PairNoteMemo } from './lockout.js';

export interface PasswordAttempt {
  user: string;
  password: string;
  /** The client's address as the gateway trusts it (see server.trustProxy). */
  address: string;
  /**
   * Where a caller that checks this very user:password again and again (Basic on a keep-alive
   * connection) keeps what a check works out, so that the next one hashes nothing: see AttemptMemo.
   */
  memo?: AttemptMemo;
}

/**
 * What checking one user:password works out and can reuse: its attempt key, made under the source's
 * `keyEpoch` (made again when that changed), and the lockout's note of the pair for one address (see
 * PairNoteMemo). Each is valid only for the user:password it was made for: the memo belongs to that one
 * attempt, never to a user.
 */
export interface AttemptMemo extends PairNoteMemo {
  key: string | undefined;
  epoch: unknown;
}

/**
 * Where passwords are verified (the htpasswd file's PasswordVerifier, the directory's DirectoryUsers,
 * UserSources choosing between them): a key per attempt, a cache of verified ones, the check itself.
 */
export interface PasswordSource {
  /** What identifies this user:password (holds no password); identical attempts have the same key. */
  attemptKey(user: string, password: string): string;
  /** True when the attempt with this key was verified within the source's cache time. */
  isCachedKey(key: string): boolean;
  /**
   * Changes (by identity) whenever attemptKey could answer otherwise for some user:password (another
   * users table): a key made under an epoch that is no longer current is made again.
   */
  readonly keyEpoch: unknown;
  /** Whether the password is right; may throw a DomainError (the directory or the store unavailable) when it cannot be told now. */
  verify(user: string, password: string): Promise<boolean>;
  /**
   * Makes sure what the source holds of this user is true now, before anything about it is trusted (the
   * users kept in the store: see StoreUsers.confirm); undefined when it already is. May reject with a
   * DomainError (the store unavailable) when that cannot be told now.
   */
  confirm?(user: string): void | Promise<void>;
}

/**
 * The one place a user name and password are judged, for Basic and for token create alike:
 * lockout first, then bcrypt; a failure counts toward the lockout, a success clears its count.
 */
export class PasswordCheck {
  private readonly lanes: AddressLanes;
  /**
   * The checks running now, by attempt key (see PasswordVerifier.attemptKey) and address: an identical
   * attempt from the same address joins the running one from the moment it arrives, whether that one
   * waits for its place in the lane, for the store's lock check or for bcrypt.
   */
  private readonly running = new Map<string, Promise<boolean>>();

  /** `addressBurst`: checks of a clean address at once; `narrowForMs`: how long a failure makes it one at a time. */
  constructor(private readonly verifier: PasswordSource, private readonly lockout: Lockout, limits: { addressBurst: number; narrowForMs: number }) {
    this.lanes = new AddressLanes(limits.addressBurst, limits.narrowForMs);
  }

  /**
   * Throws 401 invalid_credentials or 429 too_many_attempts. A user:password verified within the cache
   * TTL costs no bcrypt and takes no place in the address's lane; it still respects the lock of that user
   * from that address (the right password included). With `trustCache` (Basic) that is all it respects, and
   * it costs a store read only now and then (see Lockout.checkPair): an attacker who locks the account from
   * other addresses, or slows the address down, does not also cut off the user's running clients. Without
   * it (token create) every lock and the address's throttle apply.
   */
  check(attempt: PasswordAttempt, options: { trustCache: boolean }): void | Promise<void> {
    const confirming = this.verifier.confirm?.(attempt.user);
    if (confirming !== undefined) return confirming.then(() => this.checkConfirmed(attempt, options));
    return this.checkConfirmed(attempt, options);
  }

  private checkConfirmed(attempt: PasswordAttempt, options: { trustCache: boolean }): void | Promise<void> {
    const key = this.keyOf(attempt);
    if (this.verifier.isCachedKey(key)) {
      // Basic with a fresh note of the pair: no promise at all.
      if (options.trustCache) return this.lockout.checkPair(attempt.user, attempt.address, attempt.memo);
      return this.lockout.check(attempt.user, attempt.address).then(() => undefined);
    }
    return this.checkUncached(key, attempt);
  }

  /** The attempt's key: the one its memo holds while the source's key epoch is the same, else made now. */
  private keyOf(attempt: PasswordAttempt): string {
    const memo = attempt.memo;
    if (memo === undefined) return this.verifier.attemptKey(attempt.user, attempt.password);
    const epoch = this.verifier.keyEpoch;
    if (memo.key === undefined || memo.epoch !== epoch) {
      memo.key = this.verifier.attemptKey(attempt.user, attempt.password);
      memo.epoch = epoch;
    }
    return memo.key;
  }

  private async checkUncached(key: string, attempt: PasswordAttempt): Promise<void> {
    // The same user:password from the same address being checked right now (clients reconnecting
    // together after a restart, parallel requests of one client): the answer of that check, without a
    // place in the address's lane, where a burst of identical sign-ins would be refused as a flood. It is
    // the same guess, so it adds nothing to guess with, and a failure is counted once, by that check; its
    // lock check was this attempt's (same user, same address), and so is its 429 or 503.
    const runningKey = `${key} ${attempt.address}`;
    let running = this.running.get(runningKey);
    if (!running) {
      running = this.judge(attempt).finally(() => this.running.delete(runningKey));
      this.running.set(runningKey, running);
    }
    if (!(await running)) throw invalidCredentials();
  }

  /**
   * Through the address's lane (see AddressLanes): concurrent guesses from one address cannot all pass the
   * check before any failure is counted, while a clean address's users sign in side by side. Guesses at
   * one user from many addresses can overshoot the account limit by the number in flight (at most
   * users.maxPendingVerifications per instance).
   */
  private judge(attempt: PasswordAttempt): Promise<boolean> {
    return this.lanes.run(attempt.address, async () => {
      const standing = await this.lockout.check(attempt.user, attempt.address);
      if (await this.verifier.verify(attempt.user, attempt.password)) {
        await this.lockout.succeed(attempt.user, attempt.address, standing);
        return true;
      }
      this.lanes.failed(attempt.address);
      await this.lockout.fail(attempt.user, attempt.address);
      return false;
    });
  }
}

/** What a token issued now must still match to stay valid (see PasswordVerifier.credentialVersion). */
export type CredentialVersions = (user: string) => string | undefined;

function invalidCredentials(): DomainError {
  return new DomainError('invalid_credentials', 'the user name or password is wrong');
}
