import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { AttemptMemo, CredentialVersions, PasswordCheck } from '../credentials/password-check.js';
import { DomainError } from '../core/domain-error.js';
import type { Principal } from '../core/principal.js';
import type { Authenticator } from './authenticator.js';
import { REALM, schemeMatcher } from './authenticator.js';
import { parseAuthorization } from './authorization-header.js';

export const BASIC_CHALLENGE = `Basic realm="${REALM}", charset="UTF-8"`;

/** A Basic header read, and what checking its user:password worked out (the attempt's memo). */
interface BasicCredentials extends AttemptMemo {
  readonly header: string;
  readonly user: string;
  readonly password: string;
}

const isBasic = schemeMatcher('basic');

/**
 * `Authorization: Basic` with a user of the users file: the password is checked by PasswordCheck
 * (lockout, address lanes, bcrypt off the event loop), and a password verified moments ago passes
 * without waiting. A browser sends cached Basic credentials by itself: the principal is ambient.
 * An open tunnel holds while the user's credential version (its line in the file) is unchanged.
 *
 * A client sends the same header on every request of a connection: the last one read on each connection
 * is kept with what checking it worked out (AttemptMemo: the attempt key, the lockout's note), so the
 * next request with that very header is neither decoded nor hashed again. Its password is kept no longer
 * than the connection that keeps sending it, and nowhere else.
 */
export function basicAuthenticator(passwords: PasswordCheck, credentialVersion: CredentialVersions): Authenticator<BasicCredentials> {
  const lastRead = new WeakMap<object, BasicCredentials>();
  return {
    via: 'basic',
    scheme: 'basic',
    challenge: BASIC_CHALLENGE,
    securityScheme: { name: 'basic', scheme: { type: 'http', scheme: 'basic', description: 'A user and password of the gateway\'s users (the htpasswd file, users kept in the store, the LDAP directory).' } },
    parse(req) {
      const header = req.headers.authorization;
      if (header === undefined || !isBasic(header)) return undefined;
      const connection = connectionOf(req);
      const last = lastRead.get(connection);
      if (last !== undefined && last.header === header) return last;
      const parsed = parseAuthorization(header);
      if (parsed.ok && parsed.credentials.scheme === 'basic') {
        const { user, password } = parsed.credentials;
        const read: BasicCredentials = { header, user, password, key: undefined, epoch: undefined, note: undefined, noteAddress: undefined };
        lastRead.set(connection, read);
        return read;
      }
      throw new DomainError('credentials_not_accepted', parsed.ok ? 'the Authorization header is malformed' : parsed.reason, { challenge: BASIC_CHALLENGE });
    },
    verify(credentials, ex) {
      const user = credentials.user;
      // Before the check, so a refusal's access line names the user name that was tried.
      ex.triedUser = user;
      const checked = passwords.check({ user, password: credentials.password, address: ex.address, memo: credentials }, { trustCache: true });
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

/** The connection a request came on: its socket, or for HTTP/2 its session (a stream's `socket` is a proxy of its own). */
function connectionOf(req: IncomingMessage): object {
  if (req.httpVersionMajor === 2) return (req as unknown as Http2ServerRequest).stream.session ?? req.socket;
  return req.socket;
}
