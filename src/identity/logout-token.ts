import type { IssuerAlg } from '../config/types.js';
import type { IssuerKeys, ProviderKey } from './issuer-keys.js';
import { decodeToken, signedByOneOf } from './provider-jwt.js';

/** The event a back-channel logout token carries (OpenID Connect Back-Channel Logout 1.0, section 2.4). */
const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

/** Whom a valid logout token logs out: the provider's session, or else every session of its user. */
export interface LogoutSubject {
  sid: string | undefined;
  sub: string | undefined;
  /** The token's own id: remembered, so that the same token is refused the second time. */
  jti: string;
}

/** The longest `jti` taken (providers use a UUID or a few dozen random characters). */
const MAX_JTI_LENGTH = 256;

/** Why a logout token was refused (answered 400 invalid_request). */
export class InvalidLogoutToken extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'InvalidLogoutToken';
  }
}

/**
 * Validates a logout token as section 2.6 of the spec has it: a JWS signed by one of the issuer's keys
 * (the same cache bearer tokens use; an unknown kid refetches once), an algorithm the issuer may use,
 * `iss` the issuer, `aud` containing the client id, `iat` present, not in the future and no older than
 * `maxAgeSeconds` (each with the issuer's skew), `exp` (when present) not past, a `jti`, the
 * back-channel logout event, no `nonce`, and `sid` or `sub`. Whether its `jti` was seen before is the
 * caller's (the store's) to say. Rejects with InvalidLogoutToken, or with KeysUnavailable when no key of
 * the issuer is known.
 */
export async function verifyLogoutToken(token: string, issuer: IssuerKeys, clientId: string, maxAgeSeconds: number): Promise<LogoutSubject> {
  const decoded = decodeToken(token);
  if (!decoded) throw new InvalidLogoutToken('the logout_token is not a signed JWT');
  const { header, payload } = decoded;
  const alg = header.alg;
  if (typeof alg !== 'string' || !issuer.config.algorithms.includes(alg as IssuerAlg)) throw new InvalidLogoutToken(`the logout_token's algorithm is not one ${issuer.name} may use`);
  if (header.crit !== undefined) throw new InvalidLogoutToken('the logout_token has critical header parameters');
  if (header.typ !== undefined && header.typ !== 'logout+jwt' && header.typ !== 'JWT') throw new InvalidLogoutToken('the logout_token\'s typ is not logout+jwt');
  const kid = header.kid;
  if (kid !== undefined && typeof kid !== 'string') throw new InvalidLogoutToken('the logout_token\'s kid is not a string');
  if (payload.iss !== issuer.issuer) throw new InvalidLogoutToken(`the logout_token's iss is not ${issuer.issuer}`);
  const aud = payload.aud;
  const auds = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
  if (!auds.includes(clientId)) throw new InvalidLogoutToken('the logout_token\'s aud does not name this client');
  const now = issuer.now() / 1000;
  const skew = issuer.config.clockSkewSeconds;
  if (typeof payload.iat !== 'number' || !Number.isFinite(payload.iat) || payload.iat > now + skew) throw new InvalidLogoutToken('the logout_token has no iat, or one in the future');
  // Without a bound, a token captured once (with no exp) could end the user's later sessions for ever.
  if (payload.iat < now - maxAgeSeconds - skew) throw new InvalidLogoutToken(`the logout_token was issued more than ${maxAgeSeconds} s ago (login.logoutTokenMaxAgeSeconds)`);
  if (payload.exp !== undefined && (typeof payload.exp !== 'number' || payload.exp <= now - skew)) throw new InvalidLogoutToken('the logout_token has expired');
  const events = payload.events;
  const event = typeof events === 'object' && events !== null && !Array.isArray(events) ? (events as Record<string, unknown>)[BACKCHANNEL_LOGOUT_EVENT] : undefined;
  if (typeof event !== 'object' || event === null || Array.isArray(event)) throw new InvalidLogoutToken(`the logout_token has no ${BACKCHANNEL_LOGOUT_EVENT} event`);
  if (payload.nonce !== undefined) throw new InvalidLogoutToken('a logout_token must not have a nonce');
  const jti = payload.jti;
  if (typeof jti !== 'string' || jti === '' || jti.length > MAX_JTI_LENGTH) throw new InvalidLogoutToken(`the logout_token has no jti (a string of 1 to ${MAX_JTI_LENGTH} characters)`);
  const sid = typeof payload.sid === 'string' && payload.sid !== '' ? payload.sid : undefined;
  const sub = typeof payload.sub === 'string' && payload.sub !== '' ? payload.sub : undefined;
  if (!sid && !sub) throw new InvalidLogoutToken('the logout_token has neither sid nor sub');
  const keys: ProviderKey[] = await issuer.keysFor(kid, alg as IssuerAlg);
  if (!(await signedByOneOf(token, alg as IssuerAlg, keys))) throw new InvalidLogoutToken('the logout_token\'s signature is not valid');
  return { sid, sub, jti };
}
