import { DomainError } from '../core/domain-error.js';
import type { Principal } from '../core/principal.js';
import type { TokenService } from '../tokens/service.js';
import { invalidToken, type AccessClaims } from '../tokens/access-token.js';
import type { Exchange } from '../core/exchange.js';
import type { Authenticator } from './authenticator.js';
import { REALM, schemeMatcher } from './authenticator.js';

export const BEARER_CHALLENGE = `Bearer realm="${REALM}"`;

/** RFC 6750 section 2.1: `Bearer` and one token68. */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
const HEADER = /^[A-Za-z]+ ([A-Za-z0-9\-._~+/]+=*)$/;
const isBearer = schemeMatcher('bearer');

/**
 * `Authorization: Bearer <access token>` of the gateway's own tokens: the signature and claims
 * (AccessTokenCodec, byte-identical tokens from its cache), the user's credential version, then whether
 * the session is live: from the liveness cache without waiting when it knows, else one store round trip.
 * The principal carries the session (its revocation ends a tunnel) and the token's expiry. A token bound
 * to a client certificate (`cnf.x5t#S256`, RFC 8705 §3) passes only over a connection whose verified
 * certificate has that thumbprint (`ex.certificate`, recorded by the connection check).
 */
export function bearerAuthenticator(tokens: TokenService): Authenticator<string> {
  return {
    via: 'bearer',
    scheme: 'bearer',
    // No form: every bearer credential no other source's form claims is its to judge.
    knows: (token) => tokens.knowsAccessToken(token),
    challenge: BEARER_CHALLENGE,
    securityScheme: { name: 'bearer', scheme: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'An access token from /v1/tokens/create or /v1/tokens/refresh.' } },
    parse(req, credentials) {
      const header = req.headers.authorization;
      if (header === undefined || !isBearer(header)) return undefined;
      // The common spelling: `Bearer ` and the token (one verified before needs no second look at its characters).
      if (header.charCodeAt(6) === 0x20) {
        const token = credentials ?? header.slice(7);
        if (tokens.knowsAccessToken(token) || TOKEN68.test(token)) return token;
      }
      const m = HEADER.exec(header);
      if (m) return m[1]!;
      throw new DomainError('malformed_bearer', 'the Authorization header is malformed');
    },
    verify(token, ex) {
      const claims = tokens.verifyAccessTokenNow(token);
      return claims instanceof Promise ? claims.then((c) => principal(bound(c, ex), token)) : principal(bound(claims, ex), token);
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

/** The claims of a token that is unbound, or bound to the certificate of the request's connection. */
function bound(claims: AccessClaims, ex: Exchange): AccessClaims {
  if (claims.cnf !== undefined && claims.cnf['x5t#S256'] !== ex.certificate) {
    throw invalidToken('the access token is bound to a client certificate this connection does not present');
  }
  return claims;
}

function principal(claims: AccessClaims, token: string): Principal {
  return { user: claims.sub, via: 'bearer', groups: undefined, ownGroups: false, sid: claims.sid, expiresAt: claims.exp, ambient: false, proof: token, credential: undefined };
}
