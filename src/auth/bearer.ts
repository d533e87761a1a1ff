import { DomainError } from '../core/domain-error.js';
import { HttpProblem, REALM } from '../core/problem.js';
import type { Principal } from '../core/principal.js';
import type { TokenService } from '../tokens/service.js';
import type { AccessClaims } from '../tokens/access-token.js';
import type { Authenticator } from './authenticator.js';
import { schemeMatcher } from './authenticator.js';

export const BEARER_CHALLENGE = `Bearer realm="${REALM}"`;

/** RFC 6750 section 2.1: `Bearer` and one token68. */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
const HEADER = /^[A-Za-z]+ ([A-Za-z0-9\-._~+/]+=*)$/;
const isBearer = schemeMatcher('bearer');

/**
 * `Authorization: Bearer <access token>` of the gateway's own tokens: the signature and claims
 * (AccessTokenCodec, byte-identical tokens from its cache), the user's credential version, then whether
 * the session is live: from the liveness cache without waiting when it knows, else one store round trip.
 * The principal carries the session (its revocation ends a tunnel) and the token's expiry.
 */
export function bearerAuthenticator(tokens: TokenService): Authenticator<string> {
  return {
    via: 'bearer',
    scheme: 'bearer',
    challenge: BEARER_CHALLENGE,
    parse(req) {
      const header = req.headers.authorization;
      if (header === undefined || !isBearer(header)) return undefined;
      // The common spelling: `Bearer ` and the token.
      if (header.charCodeAt(6) === 0x20 && TOKEN68.test(header.slice(7))) return header.slice(7);
      const m = HEADER.exec(header);
      if (m) return m[1]!;
      throw new HttpProblem(401, 'invalid_token', 'the Authorization header is malformed', {
        headers: { 'WWW-Authenticate': `${BEARER_CHALLENGE}, error="invalid_request"` },
      });
    },
    verify(token) {
      const claims = tokens.verifyAccessTokenNow(token);
      return claims instanceof Promise ? claims.then((c) => principal(c, token)) : principal(claims, token);
    },
    async recheck(owner) {
      try {
        await tokens.verifyAccessToken(owner.proof);
        return undefined;
      } catch (err) {
        // A refused token ends it; the store being down does not (open tunnels outlive a Redis blip).
        return err instanceof DomainError && (err.code === 'invalid_token' || err.code === 'token_expired') ? err.code : undefined;
      }
    },
  };
}

function principal(claims: AccessClaims, token: string): Principal {
  return { user: claims.sub, via: 'bearer', groups: undefined, sid: claims.sid, expiresAt: claims.exp, ambient: false, proof: token };
}
