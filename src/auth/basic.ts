import type { PasswordCheck } from '../credentials/password-check.js';
import type { CredentialVersions } from '../credentials/password-check.js';
import { HttpProblem, REALM } from '../core/problem.js';
import type { Principal } from '../core/principal.js';
import type { Authenticator } from './authenticator.js';
import { schemeMatcher } from './authenticator.js';
import { parseAuthorization } from './authorization-header.js';

export const BASIC_CHALLENGE = `Basic realm="${REALM}", charset="UTF-8"`;

interface BasicCredentials {
  user: string;
  password: string;
}

const isBasic = schemeMatcher('basic');

/**
 * `Authorization: Basic` with a user of the users file: the password is checked by PasswordCheck
 * (lockout, address lanes, bcrypt off the event loop), and a password verified moments ago passes
 * without waiting. A browser sends cached Basic credentials by itself: the principal is ambient.
 * An open tunnel holds while the user's credential version (its line in the file) is unchanged.
 */
export function basicAuthenticator(passwords: PasswordCheck, credentialVersion: CredentialVersions): Authenticator<BasicCredentials> {
  return {
    via: 'basic',
    scheme: 'basic',
    challenge: BASIC_CHALLENGE,
    parse(req) {
      const header = req.headers.authorization;
      if (header === undefined || !isBasic(header)) return undefined;
      const parsed = parseAuthorization(header);
      if (parsed.ok && parsed.credentials.scheme === 'basic') return parsed.credentials;
      throw new HttpProblem(401, 'invalid_credentials', parsed.ok ? 'the Authorization header is malformed' : parsed.reason, {
        headers: { 'WWW-Authenticate': BASIC_CHALLENGE },
      });
    },
    verify({ user, password }, ex) {
      // Before the check, so a refusal's access line names the user name that was tried.
      ex.triedUser = user;
      const checked = passwords.check({ user, password, address: ex.address }, { trustCache: true });
      return checked === undefined ? principal(user) : checked.then(() => principal(user));
    },
    recheck(owner) {
      return credentialVersion(owner.user) === owner.proof ? undefined : 'credentials changed';
    },
  };

  function principal(user: string): Principal {
    return { user, via: 'basic', groups: undefined, ownGroups: false, sid: undefined, expiresAt: undefined, ambient: true, proof: credentialVersion(user) ?? '', credential: undefined };
  }
}
