import type { Clock } from '../clock.js';
import type { CredentialVersions, PasswordAttempt, PasswordCheck } from '../credentials/password-check.js';
import { DomainError } from '../core/domain-error.js';
import { invalidToken, type AccessClaims, type AccessTokenCodec } from './access-token.js';
import { MAX_GENERATION, parseRefreshToken, refreshTokenFor } from './refresh-token.js';
import type { Sessions } from '../stores/sessions/session-store.js';

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  expiresInSeconds: number;
}

export type TokenType = 'ACCESS_TOKEN' | 'REFRESH_TOKEN';

export interface BearerPrincipal {
  user: string;
  sid: string;
  /** When the access token expires (seconds since the epoch): a long-lived holder ends there. */
  exp: number;
}

export interface TokenServiceOptions {
  accessTtlSeconds: number;
  refreshTtlSeconds: number;
  refreshReuseGraceSeconds: number;
  /** What refresh tokens are derived with (see refresh-token.ts). */
  refreshKey: Buffer;
  /**
   * The user's credential version in the unkeyed form of the releases before the keyed `uv` (the plain
   * fingerprint of the user's hash): a session made in that form keeps it, and is still the user's while
   * the hash is unchanged. Without it only the keyed form holds.
   */
  unkeyedVersion?: CredentialVersions;
}

/** A revoke step's answer when the token is not of its kind (the next kind is tried). */
const NOT_THIS_KIND = Symbol('notThisKind');

/** The token rules (spec sections 3 and 5); the store only makes them atomic. */
export class TokenService {
  constructor(
    private readonly codec: AccessTokenCodec,
    private readonly store: Sessions,
    private readonly passwords: PasswordCheck,
    private readonly credentialVersion: CredentialVersions,
    private readonly options: TokenServiceOptions,
    private readonly clock: Clock,
  ) {}

  /**
   * `thumbprint`: the x5t#S256 of the verified client certificate of the request's connection; the pair
   * is then bound to it (RFC 8705 §3): the access token's `cnf`, and the session's refresh tokens.
   */
  async create(attempt: PasswordAttempt, thumbprint?: string): Promise<TokenPair> {
    await this.passwords.check(attempt, { trustCache: false });
    const uv = this.credentialVersion(attempt.user)!;
    const sid = await this.store.createSession({ sub: attempt.user, uv }, this.options.refreshTtlSeconds);
    return this.pair(attempt.user, sid, uv, refreshTokenFor(this.options.refreshKey, sid, 0, thumbprint).token, thumbprint);
  }

  /**
   * Rotates: the presented refresh token must be the session's current one, or the one just rotated
   * away, presented again before its successor was used, however late (a retry after a lost answer, a
   * second tab): that gets the same successor. Any other earlier one (its successor was used) is reuse
   * (RFC 9700 section 4.14): the whole session is revoked. refreshReuseGraceSeconds 0: no retries.
   */
  async refresh(refreshToken: string, thumbprint?: string): Promise<TokenPair> {
    const presented = parseRefreshToken(this.options.refreshKey, refreshToken);
    if (!presented || presented.generation >= MAX_GENERATION) throw invalidRefreshToken();
    // A bound session's token over another certificate or none never reaches the store: no rotation,
    // nothing the legitimate holder's next refresh would read as reuse.
    if (presented.thumbprint !== undefined && presented.thumbprint !== thumbprint) throw invalidRefreshToken('the refresh token is bound to a client certificate this connection does not present');
    const outcome = await this.store.rotateRefresh(presented.sid, {
      generation: presented.generation,
      ttlSeconds: this.options.refreshTtlSeconds,
      graceMs: this.options.refreshReuseGraceSeconds * 1000,
      nowMs: this.clock.now(),
    });
    if (outcome.result !== 'rotated') throw invalidRefreshToken();
    if (!this.holds(outcome.sub, outcome.uv)) {
      // The user was removed or its password changed since sign-in: the session ends here.
      await this.store.revoke(presented.sid);
      throw invalidRefreshToken();
    }
    const successor = refreshTokenFor(this.options.refreshKey, presented.sid, outcome.generation, presented.thumbprint);
    return this.pair(outcome.sub, presented.sid, outcome.uv, successor.token, presented.thumbprint);
  }

  /**
   * Kills the session the token belongs to, so its access and refresh tokens die together (spec
   * section 3). Unknown, expired and garbage tokens are no error (RFC 7009); `type` is a hint and the
   * other kind is tried when the token is not of the hinted one (RFC 7009 section 2.1). Answers the user
   * of the session it ended, for the audit line (undefined: no session was live).
   */
  async revoke(token: string, type: TokenType): Promise<string | undefined> {
    const kinds = type === 'ACCESS_TOKEN' ? [this.revokeAccess, this.revokeRefresh] : [this.revokeRefresh, this.revokeAccess];
    for (const kind of kinds) {
      const outcome = await kind.call(this, token);
      if (outcome !== NOT_THIS_KIND) return outcome;
    }
    return undefined;
  }

  /** Signature, claims, then the live-session check: revocation takes effect on every instance at once. */
  async verifyAccessToken(token: string): Promise<BearerPrincipal> {
    const claims = await this.verifyAccessTokenNow(token);
    return { user: claims.sub, sid: claims.sid, exp: claims.exp };
  }

  /** Whether this exact access token was verified before (see AccessTokenCodec.knows). */
  knowsAccessToken(token: string): boolean {
    return this.codec.knows(token);
  }

  /**
   * verifyAccessToken without waiting where nothing must be waited for: the claims at once when the
   * store knows the session live right now (its liveness cache), else a promise of them (one round trip).
   */
  verifyAccessTokenNow(token: string): AccessClaims | Promise<AccessClaims> {
    const claims = this.codec.verify(token);
    if (!this.holds(claims.sub, claims.uv)) throw invalidToken('the credentials of this user have changed');
    const live = this.store.isLiveNow(claims.sid);
    if (live === true) return claims;
    if (live === false) throw revoked();
    return this.store.isLive(claims.sid).then((known) => {
      if (!known) throw revoked();
      return claims;
    });
  }

  private async revokeAccess(token: string): Promise<string | undefined | typeof NOT_THIS_KIND> {
    let sid: string;
    try {
      // An expired access token still names its session, whose refresh token may live on.
      sid = this.codec.verify(token, { ignoreExpiration: true }).sid;
    } catch (err) {
      if (err instanceof DomainError) return NOT_THIS_KIND;
      throw err;
    }
    return this.store.revoke(sid);
  }

  /**
   * A refresh token this gateway issued (its MAC checked, whatever its generation) ends its session; a
   * malformed or forged one never reaches the store, so the answer's timing says nothing about sessions.
   */
  private async revokeRefresh(token: string): Promise<string | undefined | typeof NOT_THIS_KIND> {
    const presented = parseRefreshToken(this.options.refreshKey, token);
    if (!presented) return NOT_THIS_KIND;
    return this.store.revoke(presented.sid);
  }

  /**
   * Whether a session's credential version (its `uv`) is still the user's: the keyed form new sessions
   * carry, or the unkeyed form of a session made by an earlier release. A session keeps the form it was
   * made in (its refreshes copy the session's `uv`), so upgrading or rolling back ends no session.
   */
  private holds(user: string, uv: string): boolean {
    if (uv === this.credentialVersion(user)) return true;
    const unkeyed = this.options.unkeyedVersion;
    return unkeyed !== undefined && uv !== '' && uv === unkeyed(user);
  }

  private pair(sub: string, sid: string, uv: string, refreshToken: string, thumbprint: string | undefined): TokenPair {
    const { token } = this.codec.sign(sub, sid, uv, thumbprint);
    return { accessToken: token, refreshToken, expiresInSeconds: this.options.accessTtlSeconds };
  }
}

function revoked(): DomainError {
  return invalidToken('the access token has been revoked');
}

function invalidRefreshToken(detail = 'the refresh token is invalid, expired, revoked or already used'): DomainError {
  return new DomainError('invalid_refresh_token', detail);
}
