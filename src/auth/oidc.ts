import type { IssuerAlg } from '../config/types.js';
import { DomainError, type DomainCode } from '../core/domain-error.js';
import { isGroupName, isUsableName } from '../core/headers.js';
import type { Principal } from '../core/principal.js';
import { TokenMap } from '../core/token-map.js';
import { KeysUnavailable, type IssuerKeys, type ProviderKey } from '../identity/issuer-keys.js';
import { claimAt, decodeToken, signedByOneOf, type DecodedToken } from '../identity/provider-jwt.js';
import type { Authenticator } from './authenticator.js';
import { schemeMatcher } from './authenticator.js';
import { BEARER_CHALLENGE } from './bearer.js';

/** A provider's token on a request: decoded, and the issuer its `iss` names (or its entry in the cache of verified tokens). */
export interface ProviderCredentials {
  decoded: DecodedToken | undefined;
  issuer: IssuerKeys;
  token: string;
  verified: VerifiedToken | undefined;
}

/** A token verified before: what its principal is made of, and the key set that verified it. */
interface VerifiedToken {
  issuer: IssuerKeys;
  generation: number;
  user: string;
  groups: string[];
  exp: number;
}

/** Tokens remembered as verified (a steady client costs a Map lookup, not a signature check); past it the cache starts again. */
const MAX_VERIFIED = 10_000;

const isBearer = schemeMatcher('bearer');
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
/** How long a client is asked to wait when no key of a provider is known (the refetch throttle). */
const RETRY_AFTER_S = 10;

/**
 * `Authorization: Bearer <JWT>` issued by a configured OpenID provider (identity.issuers): recognised
 * only when the token's unverified `iss` equals a configured issuer exactly, so the gateway's own bearer
 * authenticator (after this one) keeps its own tokens and every other token. Verified against that
 * issuer's keys (jsonwebtoken; EdDSA jose), synchronously when they are cached (IssuerKeys) or the
 * token is in the cache of verified tokens (EdDSA: only then): the algorithm pinned per issuer and per
 * key (never HS*, never none), `aud`, `exp` and `nbf` with the issuer's skew. The user is `userClaim`,
 * the groups `groupsClaim` (they are the principal's groups: the allow step keeps them). No valid key
 * of the issuer known: identity_provider_unavailable for its tokens only.
 */
export function oidcAuthenticator(issuers: readonly IssuerKeys[]): Authenticator<ProviderCredentials> {
  const byIssuer = new Map(issuers.map((i) => [i.issuer, i]));
  // Byte-identical tokens verified before, with the key set that verified them: while that set is the
  // issuer's current one, only exp is checked again (the signature and the other claims cannot change).
  const verified = new TokenMap<VerifiedToken>();
  const remember = (token: string, issuer: IssuerKeys, p: Principal) => {
    if (verified.size >= MAX_VERIFIED) verified.clear();
    verified.set(token, { issuer, generation: issuer.generation, user: p.user, groups: p.groups as string[], exp: p.expiresAt! });
    return p;
  };
  return {
    via: 'oidc',
    scheme: 'bearer',
    // Its tokens are told from the gateway's own and API keys by their iss (the configured issuers).
    form: { issuers: issuers.map((i) => i.issuer) },
    knows: (token) => verified.has(token),
    challenge: BEARER_CHALLENGE,
    securityScheme: { name: 'providerToken', scheme: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: `An access token of a configured OpenID provider (${issuers.map((i) => i.issuer).join(', ')}).` } },
    parse(req, credentials) {
      const header = req.headers.authorization;
      if (header === undefined || !isBearer(header) || header.charCodeAt(6) !== 0x20) return undefined;
      const token = credentials ?? header.slice(7);
      const hit = verified.get(token);
      if (hit) return { decoded: undefined, issuer: hit.issuer, token, verified: hit };
      if (!TOKEN68.test(token)) return undefined;
      const decoded = decodeToken(token);
      const iss = decoded?.payload.iss;
      const issuer = typeof iss === 'string' ? byIssuer.get(iss) : undefined;
      return issuer ? { decoded: decoded!, issuer, token, verified: undefined } : undefined;
    },
    verify({ decoded, issuer, token, verified: hit }) {
      if (hit) {
        if (issuer.now() / 1000 - issuer.config.clockSkewSeconds >= hit.exp) {
          verified.delete(token);
          throw expired();
        }
        if (issuer.stillValid(hit.generation)) {
          return { user: hit.user, via: 'oidc', groups: hit.groups, ownGroups: true, sid: undefined, expiresAt: hit.exp, ambient: false, proof: token, credential: undefined };
        }
        verified.delete(token);
        decoded = decodeToken(token)!;
      }
      const p = verifyProviderToken(decoded!, issuer);
      return p instanceof Promise ? p.then((ok) => remember(token, issuer, ok)) : remember(token, issuer, p);
    },
    recheck(owner) {
      // An open tunnel: the token is checked again against the keys known now (a key the provider
      // withdrew ends it); a provider that cannot be reached is no reason.
      const decoded = decodeToken(owner.proof);
      const iss = decoded?.payload.iss;
      const issuer = typeof iss === 'string' ? byIssuer.get(iss) : undefined;
      if (!decoded || !issuer) return 'issuer no longer accepted';
      const outcome = (err: unknown) => (err instanceof DomainError ? REFUSED[err.code] : undefined);
      try {
        const checked = verifyProviderToken(decoded, issuer);
        return checked instanceof Promise ? checked.then(() => undefined, outcome) : undefined;
      } catch (err) {
        return outcome(err);
      }
    },
  };
}

/** Verifies a provider token: the principal at once when a cached key verifies it (not EdDSA's: jose is async), else after one refetch. */
function verifyProviderToken(decoded: DecodedToken, issuer: IssuerKeys): Principal | Promise<Principal> {
  const { header } = decoded;
  const alg = header.alg;
  if (typeof alg !== 'string' || !issuer.config.algorithms.includes(alg as IssuerAlg)) {
    throw invalid(`the token's algorithm ${typeof alg === 'string' ? alg : '(none)'} is not one ${issuer.name} may use (${issuer.config.algorithms.join(', ')})`);
  }
  if (header.crit !== undefined) throw invalid('the token has critical header parameters the gateway does not understand');
  if (!isAccessTokenType(header.typ)) throw invalid(`the token's typ ${JSON.stringify(header.typ)} is not an access token's (an ID token or a logout token is no bearer credential)`);
  const kid = header.kid === undefined ? undefined : header.kid;
  if (kid !== undefined && typeof kid !== 'string') throw invalid('the token\'s kid is not a string');
  // Claims first (no key needed): an expired token never waits for a refetch.
  const claims = checkClaims(decoded, issuer);
  let keys: ProviderKey[] | Promise<ProviderKey[]>;
  try {
    keys = issuer.keysFor(kid, alg as IssuerAlg);
  } catch (err) {
    throw unavailable(err, issuer);
  }
  if (keys instanceof Promise) {
    return keys.then((k) => principalOf(decoded, alg as IssuerAlg, k, claims, issuer), (err: unknown) => {
      throw unavailable(err, issuer);
    });
  }
  return principalOf(decoded, alg as IssuerAlg, keys, claims, issuer);
}

/** The principal once a key verifies the signature: at once for RS*, PS* and ES*, a promise for EdDSA (signedByOneOf). */
function principalOf(decoded: DecodedToken, alg: IssuerAlg, keys: ProviderKey[], claims: Claims, issuer: IssuerKeys): Principal | Promise<Principal> {
  if (keys.length === 0) throw invalid(`no key of ${issuer.name} matches the token's kid and algorithm`);
  const principal = (signed: boolean): Principal => {
    if (!signed) throw invalid('the token\'s signature is not valid');
    return { user: claims.user, via: 'oidc', groups: claims.groups, ownGroups: true, sid: undefined, expiresAt: claims.exp, ambient: false, proof: decoded.token, credential: undefined };
  };
  const signed = signedByOneOf(decoded.token, alg, keys);
  return signed instanceof Promise ? signed.then(principal) : principal(signed);
}

interface Claims {
  user: string;
  groups: string[];
  exp: number;
}

/** iss (equal, by parse), exp (required) and nbf with the skew, aud, the user and the groups. */
function checkClaims({ payload }: DecodedToken, issuer: IssuerKeys): Claims {
  const { audiences, userClaim, groupsClaim, clockSkewSeconds: skew } = issuer.config;
  const now = issuer.now() / 1000;
  const exp = payload.exp;
  if (typeof exp !== 'number' || !Number.isFinite(exp)) throw invalid('the token has no exp');
  if (now - skew >= exp) throw expired();
  const nbf = payload.nbf;
  if (nbf !== undefined && (typeof nbf !== 'number' || nbf > now + skew)) throw invalid('the token is not valid yet (nbf)');
  const iat = payload.iat;
  if (iat !== undefined && (typeof iat !== 'number' || iat > now + skew)) throw invalid('the token was issued in the future (iat)');
  const aud = payload.aud;
  const auds = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
  if (!auds.some((a) => typeof a === 'string' && audiences.includes(a))) throw invalid(`the token's aud is not one of this gateway's audiences for ${issuer.name}`);
  // azp names the client the token was issued to. A token issued to one of the gateway's own audiences
  // is that party's own token (an ID token: azp and aud are its client id), not a credential a caller
  // was given for the gateway.
  const azp = payload.azp;
  if (azp !== undefined && (typeof azp !== 'string' || audiences.includes(azp))) {
    throw invalid(`the token's azp ${JSON.stringify(azp)} is one of this gateway's audiences for ${issuer.name}: it was issued to the gateway's own client (an ID token), not to a caller`);
  }
  const user = claimAt(payload, userClaim);
  if (typeof user !== 'string' || user === '') throw invalid(`the token has no ${userClaim} to name the user`);
  // A name with a control character or a lone surrogate names no one a header, a log or an allow rule can carry.
  if (!isUsableName(user)) throw invalid(`the token's ${userClaim} is not a usable user name`);
  return { user, groups: groupsOf(payload, groupsClaim), exp };
}

/**
 * Header `typ` values of an access token: none, `JWT`, or RFC 9068's `at+jwt` (media types compare
 * without regard to case, `application/` may be left out). Others mark another kind of JWT the
 * provider signs with the same keys (`logout+jwt`, `id_token+jwt`, `token-introspection+jwt`…).
 */
const ACCESS_TOKEN_TYPES = new Set(['jwt', 'at+jwt', 'application/jwt', 'application/at+jwt']);

function isAccessTokenType(typ: unknown): boolean {
  return typ === undefined || (typeof typ === 'string' && ACCESS_TOKEN_TYPES.has(typ.toLowerCase()));
}

/** The strings of the groups claim (a group with a comma or empty is left out: headers list groups comma-separated). */
export function groupsOf(payload: Record<string, unknown>, path: string | undefined): string[] {
  if (path === undefined) return [];
  const value = claimAt(payload, path);
  if (!Array.isArray(value)) return [];
  return value.filter(isGroupName);
}

/** Why an open tunnel's provider token no longer holds (a refusal of the token itself; an unreachable provider is no reason). */
const REFUSED: Partial<Record<DomainCode, string>> = { invalid_provider_token: 'invalid_token', provider_token_expired: 'token_expired' };

function invalid(detail: string): DomainError {
  return new DomainError('invalid_provider_token', detail);
}

function expired(): DomainError {
  return new DomainError('provider_token_expired', 'the token has expired');
}

function unavailable(err: unknown, issuer: IssuerKeys): unknown {
  if (!(err instanceof KeysUnavailable)) return err;
  return new DomainError('identity_provider_unavailable', `no valid signing key of ${issuer.name} is known: ${err.message}`, { retryAfterSeconds: RETRY_AFTER_S });
}
