import { HttpProblem } from '../http/problem.js';
import { AddressLanes } from './address-lanes.js';
import type { Lockout } from './lockout.js';
import type { PasswordVerifier } from './password-verifier.js';

export interface PasswordAttempt {
  user: string;
  password: string;
  /** The client's address as the gateway trusts it (see server.trustProxy). */
  address: string;
}

/**
 * The one place a user name and password are judged, for Basic and for token create alike:
 * lockout first, then bcrypt; a failure counts toward the lockout, a success clears its count.
 */
export class PasswordCheck {
  private readonly lanes: AddressLanes;

  /** `addressBurst`: checks of a clean address at once; `narrowForMs`: how long a failure makes it one at a time. */
  constructor(private readonly verifier: PasswordVerifier, private readonly lockout: Lockout, limits: { addressBurst: number; narrowForMs: number }) {
    this.lanes = new AddressLanes(limits.addressBurst, limits.narrowForMs);
  }

  /**
   * Throws 401 invalid_credentials or 429 too_many_attempts. With `trustCache`, a user:password
   * verified moments ago passes without a store round trip: the guess it proves is already the
   * right one, and an attacker who locks a user out does not also cut off that user's running clients.
   */
  check(attempt: PasswordAttempt, options: { trustCache: boolean }): void | Promise<void> {
    // A proven password is no guess: with trustCache it passes at once, without a promise.
    if (options.trustCache && this.verifier.isCached(attempt.user, attempt.password)) return undefined;
    return this.checkNow(attempt, options.trustCache);
  }

  private async checkNow(attempt: PasswordAttempt, trustCache: boolean): Promise<void> {
    const verifier = this.verifier;
    if (verifier.isCached(attempt.user, attempt.password)) {
      // A proven password need not wait in line, only (for create) respect a lockout.
      if (!trustCache) await this.lockout.check(attempt.user, attempt.address);
      return;
    }
    // The same user:password being checked right now (clients reconnecting together after a restart,
    // parallel requests of one client): the answer of that check, without a place in the address's lane,
    // where a burst of identical sign-ins would be refused as a flood. It is the same guess, so it adds
    // nothing to guess with, and a failure is counted once, by that check.
    const running = verifier.running(attempt.user, attempt.password);
    if (running) {
      if (!(await running)) throw invalidCredentials();
      if (!trustCache) await this.lockout.check(attempt.user, attempt.address);
      return;
    }
    // Through the address's lane (see AddressLanes): concurrent guesses from one address cannot all pass
    // the check before any failure is counted, while a clean address's users sign in side by side.
    // Guesses at one user from many addresses can overshoot the account limit by the number in flight
    // (at most users.maxPendingVerifications per instance).
    return this.lanes.run(attempt.address, async () => {
      const standing = await this.lockout.check(attempt.user, attempt.address);
      if (await verifier.verify(attempt.user, attempt.password)) {
        await this.lockout.succeed(attempt.user, attempt.address, standing);
        return;
      }
      this.lanes.failed(attempt.address);
      await this.lockout.fail(attempt.user, attempt.address);
      throw invalidCredentials();
    });
  }
}

/** What a token issued now must still match to stay valid (see PasswordVerifier.credentialVersion). */
export type CredentialVersions = (user: string) => string | undefined;

export function invalidCredentials(): HttpProblem {
  return new HttpProblem(401, 'invalid_credentials', 'the user name or password is wrong');
}
