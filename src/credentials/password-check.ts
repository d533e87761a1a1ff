import { HttpProblem } from '../http/problem.js';
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
 * lockout first, then bcrypt, and a failure counts toward the lockout.
 */
export class PasswordCheck {
  /** The last check queued per user name: checks of one user run one after another. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly verifier: PasswordVerifier, private readonly lockout: Lockout) {}

  /**
   * Throws 401 invalid_credentials or 429 too_many_attempts. With `trustCache`, a user:password
   * verified moments ago passes without a store round trip: the guess it proves is already the
   * right one, and an attacker who locks a user out does not also cut off that user's running clients.
   */
  async check(attempt: PasswordAttempt, options: { trustCache: boolean }): Promise<void> {
    const verifier = this.verifier;
    if (verifier.isCached(attempt.user, attempt.password)) {
      // A proven password is no guess: it need not wait in line, only (for create) respect a lockout.
      if (!options.trustCache) await this.lockout.check(attempt.user, attempt.address);
      return;
    }
    // One at a time per user name, so each guess sees the failures of the one before it: concurrent
    // guesses at one user cannot all pass the lockout check before any failure is counted.
    return this.oneAtATime(attempt.user, async () => {
      await this.lockout.check(attempt.user, attempt.address);
      if (await verifier.verify(attempt.user, attempt.password)) return;
      await this.lockout.fail(attempt.user, attempt.address);
      throw invalidCredentials();
    });
  }

  private oneAtATime<T>(user: string, work: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(user) ?? Promise.resolve()).then(work, work);
    const tail = run.catch(() => undefined);
    this.queues.set(user, tail);
    void tail.then(() => {
      if (this.queues.get(user) === tail) this.queues.delete(user);
    });
    return run;
  }
}

/** What a token issued now must still match to stay valid (see PasswordVerifier.credentialVersion). */
export type CredentialVersions = (user: string) => string | undefined;

export function invalidCredentials(): HttpProblem {
  return new HttpProblem(401, 'invalid_credentials', 'the user name or password is wrong');
}
