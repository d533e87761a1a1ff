import { randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { Clock } from '../clock.js';
import { DomainError } from '../core/domain-error.js';
import { TokenMap } from '../core/token-map.js';
import { isLowSEs256, lowSEs256 } from '../identity/ecdsa.js';
import type { KeySet } from './keys.js';

export interface AccessClaims {
  sub: string;
  sid: string;
  /** The user's credential version at issue (see PasswordVerifier.credentialVersion). */
  uv: string;
  jti: string;
  iat: number;
  exp: number;
  /**
   * RFC 8705 §3.1: the token is bound to the client certificate of this x5t#S256 thumbprint (base64url
   * SHA-256 of its DER) and is accepted only over a connection that presents it. Absent: unbound.
   */
  cnf?: { 'x5t#S256': string };
}

export interface AccessTokenOptions {
  issuer: string;
  audience: string;
  ttlSeconds: number;
}

const MAX_TOKEN_LENGTH = 4096;
const VERIFIED_CACHE_ENTRIES = 10_000;
/** A base64url SHA-256: 43 characters. */
const THUMBPRINT = /^[A-Za-z0-9_-]{43}$/;
const JWS_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Signs and verifies the gateway's access tokens (JWT). */
export class AccessTokenCodec {
  private readonly verified = new TokenMap<AccessClaims>();

  constructor(private readonly keys: KeySet, private readonly options: AccessTokenOptions, private readonly clock: Clock) {}

  /** `thumbprint`: the x5t#S256 of the client certificate the token is bound to (undefined: unbound). */
  sign(sub: string, sid: string, uv: string, thumbprint?: string): { token: string; claims: AccessClaims } {
    const iat = Math.floor(this.clock.now() / 1000);
    const claims: AccessClaims = { sub, sid, uv, jti: randomUUID(), iat, exp: iat + this.options.ttlSeconds };
    if (thumbprint !== undefined) claims.cnf = { 'x5t#S256': thumbprint };
    const { signing } = this.keys;
    const signed = jwt.sign(
      { ...claims, iss: this.options.issuer, aud: this.options.audience },
      signing.key,
      { algorithm: signing.alg, keyid: signing.kid },
    );
    return { token: signing.alg === 'ES256' ? withLowS(signed) : signed, claims };
  }

  /**
   * Signature first (with the algorithm pinned to the key named by `kid`), then the claims.
   * Throws 401 token_expired or invalid_token; never says which check a forged token failed.
   */
  verify(token: string, options: { ignoreExpiration?: boolean } = {}): AccessClaims {
    const nowSeconds = Math.floor(this.clock.now() / 1000);
    const known = this.verified.get(token);
    if (known && !options.ignoreExpiration) {
      if (known.exp > nowSeconds) return known;
      this.verified.delete(token);
      throw tokenExpired();
    }
    const claims = this.verifySignatureAndClaims(token, nowSeconds, options.ignoreExpiration ?? false);
    if (!options.ignoreExpiration) this.remember(token, claims);
    return claims;
  }

  /** Whether this exact token was verified before (and is still kept): its spelling is known to be sound. */
  knows(token: string): boolean {
    return this.verified.has(token);
  }

  /**
   * Byte-identical tokens verified before skip the signature check until their exp: the same
   * string cannot carry other claims. Bounded, oldest first out.
   */
  private remember(token: string, claims: AccessClaims): void {
    if (this.verified.size >= VERIFIED_CACHE_ENTRIES) this.verified.deleteOldest();
    this.verified.set(token, claims);
  }

  private verifySignatureAndClaims(token: string, nowSeconds: number, ignoreExpiration: boolean): AccessClaims {
    const key = this.keyFor(token);
    // One spelling per token: the high-S twin of an ES256 signature verifies too, and is refused here.
    if (key.alg === 'ES256' && !isLowSEs256(signatureOf(token))) throw invalidToken('the access token is invalid');
    let payload: unknown;
    try {
      payload = jwt.verify(token, key.key, {
        algorithms: [key.alg],
        issuer: this.options.issuer,
        audience: this.options.audience,
        clockTimestamp: nowSeconds,
        ignoreExpiration,
      });
    } catch (err) {
      if (err instanceof jwt.TokenExpiredError) throw tokenExpired();
      throw invalidToken('the access token is invalid');
    }
    return requireClaims(payload);
  }

  private keyFor(token: string) {
    if (token.length > MAX_TOKEN_LENGTH || !JWS_SHAPE.test(token)) throw invalidToken('the access token is malformed');
    let header: unknown;
    try {
      header = JSON.parse(Buffer.from(token.slice(0, token.indexOf('.')), 'base64url').toString('utf8'));
    } catch {
      throw invalidToken('the access token is malformed');
    }
    const kid = (header as { kid?: unknown } | null)?.kid;
    // kid is untrusted input: only ever a lookup key in the map of known keys.
    const key = typeof kid === 'string' ? this.keys.byKid.get(kid) : undefined;
    if (!key) throw invalidToken('the access token was not signed by a known key');
    return key;
  }
}

function signatureOf(token: string): Buffer {
  return Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url');
}

/** jsonwebtoken signs with whatever s OpenSSL gives; the low-S spelling is the one the gateway accepts. */
function withLowS(token: string): string {
  const dot = token.lastIndexOf('.');
  return `${token.slice(0, dot)}.${lowSEs256(signatureOf(token)).toString('base64url')}`;
}

function requireClaims(payload: unknown): AccessClaims {
  const p = payload as Partial<Record<keyof AccessClaims, unknown>>;
  if (
    typeof p !== 'object' || p === null ||
    typeof p.sub !== 'string' || typeof p.sid !== 'string' || typeof p.uv !== 'string' || typeof p.jti !== 'string' ||
    typeof p.iat !== 'number' || typeof p.exp !== 'number'
  ) {
    // A token without exp would never expire: refuse it outright.
    throw invalidToken('the access token lacks required claims');
  }
  const claims: AccessClaims = { sub: p.sub, sid: p.sid, uv: p.uv, jti: p.jti, iat: p.iat, exp: p.exp };
  if (p.cnf !== undefined) {
    // A confirmation the gateway cannot check binds to nothing it knows: refused, never ignored.
    const x5t = (p.cnf as { 'x5t#S256'?: unknown } | null)?.['x5t#S256'];
    if (typeof x5t !== 'string' || !THUMBPRINT.test(x5t)) throw invalidToken('the access token has a confirmation claim the gateway cannot check');
    claims.cnf = { 'x5t#S256': x5t };
  }
  return claims;
}

export function invalidToken(detail: string): DomainError {
  return new DomainError('invalid_token', detail);
}

function tokenExpired(): DomainError {
  return new DomainError('token_expired', 'the access token has expired; use POST /v1/tokens/refresh');
}
