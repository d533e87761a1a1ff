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
  constructor(private readonly verifier: PasswordVerifier, private readonly lockout: Lockout) {}

  /**
   * Throws 401 invalid_credentials or 429 too_many_attempts. With `trustCache`, a user:password
   * verified moments ago passes without a store round trip: the guess it proves is already the
   * right one, and an attacker who locks a user out does not also cut off that user's running clients.
   */
  async check(attempt: PasswordAttempt, options: { trustCache: boolean }): Promise<void> {
    const verifier = this.verifier;
    if (options.trustCache && verifier.isCached(attempt.user, attempt.password)) return;
    await this.lockout.reserve(attempt.user, attempt.address);
    let ok: boolean;
    try {
      ok = await verifier.verify(attempt.user, attempt.password);
    } catch (err) {
      // Refused for overload (503): no guess was judged, so it does not count.
      await this.lockout.release(attempt.user, attempt.address);
      throw err;
    }
    // Only a wrong password keeps its count.
    if (!ok) throw invalidCredentials();
    await this.lockout.release(attempt.user, attempt.address);
  }
}

/** What a token issued now must still match to stay valid (see PasswordVerifier.credentialVersion). */
export type CredentialVersions = (user: string) => string | undefined;

export function invalidCredentials(): HttpProblem {
  return new HttpProblem(401, 'invalid_credentials', 'the user name or password is wrong');
}
