/**
 * Where token state lives. Every method either answers or throws StoreUnavailableError;
 * the caller decides whether that fails closed (tokens) or open (counters).
 */
export interface TokenStore {
  readonly kind: 'memory' | 'redis';
  /** Starts a session: its subject and the hash of its first refresh token. */
  createSession(sid: string, session: NewSession, ttlSeconds: number): Promise<void>;
  /** Atomically swaps the current refresh hash for a new one (see RotateOutcome). */
  rotateRefresh(sid: string, rotation: Rotation): Promise<RotateOutcome>;
  /** True while the session has been neither revoked nor let expire. */
  isLive(sid: string): Promise<boolean>;
  /**
   * Deletes the session: every token of it stops working at once. When this (or revokeByRefresh,
   * revokeUser, or a rotation answering 'reused') has answered, no instance accepts the session's tokens.
   */
  revoke(sid: string): Promise<void>;
  /** Deletes the session if `refreshHash` is its current or an earlier refresh hash; true if it did. */
  revokeByRefresh(sid: string, refreshHash: string): Promise<boolean>;
  /** The user's live sessions, oldest first. */
  listSessions(user: string): Promise<SessionInfo[]>;
  /**
   * Revokes every session of the user (on every instance, like revoke) and returns how many there were.
   * A session whose create answered before this was called is among them.
   */
  revokeUser(user: string): Promise<number>;
  /** Adds one to a counter that lives `windowSeconds` from its first hit. */
  hit(key: string, windowSeconds: number): Promise<Counter>;
  /** Reads a counter without changing it. */
  peek(key: string): Promise<Counter>;
  /** Forgets a counter. */
  reset(key: string): Promise<void>;
  /**
   * Takes one request from a GCRA bucket of `limit` requests per `windowSeconds` (burst = limit),
   * judged by the store's clock so every instance agrees.
   */
  take(key: string, limit: number, windowSeconds: number): Promise<RateDecision>;
  /**
   * Calls `listener` with the id of each session revoked from now on: here, and (redis) by any
   * instance, through the revocation channel. Returns the unsubscribe function. Best effort: while the
   * channel is down, revocations elsewhere are not heard (holders recheck with isLive).
   */
  onRevoked(listener: (sid: string) => void): () => void;
  /**
   * Resolves when the store can serve: a master that accepts writes (single node, Sentinel), a cluster
   * whose state is ok (Cluster). /readyz asks this.
   */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface NewSession {
  sub: string;
  refreshHash: string;
  /** The user's credential version when the session began. */
  uv: string;
}

export interface Rotation {
  presentedHash: string;
  nextHash: string;
  ttlSeconds: number;
  /** A rotated-away hash presented less than this many ms after its rotation is not treated as reuse (0: never). */
  graceMs: number;
  nowMs: number;
}

export type RotateOutcome =
  | { result: 'rotated'; sub: string; uv: string }
  /** No such session, or a hash it never had. */
  | { result: 'unknown' }
  /** A rotated-away hash, within the grace period: refused, session kept. */
  | { result: 'grace' }
  /** A rotated-away hash past the grace period: the session is now revoked. */
  | { result: 'reused' };

export interface Counter {
  count: number;
  /** Seconds until the counter resets; 0 when it does not exist. */
  resetSeconds: number;
}

export interface RateDecision {
  allowed: boolean;
  /** Requests left right now. */
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
  /** When refused: seconds until one request is allowed. */
  retryAfterSeconds: number;
}

export class StoreUnavailableError extends Error {
  constructor(cause?: unknown) {
    super('token store unavailable', cause === undefined ? undefined : { cause });
    this.name = 'StoreUnavailableError';
  }
}

/** What an operator may know about a session: never a token or a hash. */
export interface SessionInfo {
  sid: string;
  createdAtMs: number;
  /** When its refresh token was last rotated (= createdAtMs until then). */
  refreshedAtMs: number;
}
