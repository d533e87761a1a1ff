import type { ReplicationStats, StoreLifecycle } from '../store-contracts.js';

/**
 * Where sessions live, seen by what its callers use. Every method either answers or throws
 * StoreUnavailableError; token checks fail closed on it. (Lockout and rate-limit counters are another
 * store: src/stores/counters.) A backend implements SessionStore, all four roles; each caller takes the role it
 * needs: the token service and the CLI `Sessions`, the tunnel registry the `RevocationFeed`, readiness
 * and metrics `StoreHealth`, the composition root `StoreLifecycle`.
 */
export interface Sessions {
  /**
   * Starts a session at refresh generation 0 and answers its id (see sessionIdFor: it names where the
   * session lives). A create that fails leaves no usable session.
   */
  createSession(session: NewSession, ttlSeconds: number): Promise<string>;
  /** Moves the session to the generation after the presented one, or says why not (see RotateOutcome). */
  rotateRefresh(sid: string, rotation: Rotation): Promise<RotateOutcome>;
  /** True while the session has been neither revoked nor let expire. */
  isLive(sid: string): Promise<boolean>;
  /**
   * isLive without waiting: the answer when it is known right now (the memory store always knows; Redis
   * from its liveness cache), else undefined (ask isLive).
   */
  isLiveNow(sid: string): boolean | undefined;
  /**
   * Deletes the session: every token of it stops working at once. When this (or revokeUser, or a
   * rotation answering 'reused') has answered, no instance accepts the session's tokens. Takes the same
   * steps whether or not the session exists. Answers the user of the session it ended (for the audit
   * line), or undefined when there was none.
   */
  revoke(sid: string): Promise<string | undefined>;
  /** The user's live sessions, oldest first. */
  listSessions(user: string): Promise<SessionInfo[]>;
  /**
   * Revokes every session of the user (on every instance, like revoke) and returns how many there were.
   * A session whose create answered before this was called is among them.
   */
  revokeUser(user: string): Promise<number>;
  /**
   * Files the session under each tag (a provider's session or user: back-channel logout) for
   * `ttlSeconds`, its lifetime. Tags are opaque strings; a tag lists any number of sessions.
   */
  tagSession(sid: string, tags: readonly string[], ttlSeconds: number): Promise<void>;
  /** Revokes every session filed under the tag (on every instance, like revoke); answers how many were live. */
  revokeTagged(tag: string): Promise<number>;
  /**
   * Remembers `marker` (an opaque string: a logout token's issuer and jti) for `ttlSeconds`, for every
   * instance, in one atomic step: true when it was not remembered already, false when it was (a replay).
   */
  firstSighting(marker: string, ttlSeconds: number): Promise<boolean>;
  /**
   * Remembers where the session was made from (its client's address and user agent), for `ttlSeconds`
   * (its lifetime), in a record of its own beside the user's sessions: the session's format stays what
   * earlier releases read, and they never read this. Overwrites an earlier note of the same session.
   */
  noteSessionDevice(sid: string, user: string, device: SessionDevice, ttlSeconds: number): Promise<void>;
  /** The notes of the user's sessions (noteSessionDevice) not lapsed, by session id; a session without one is absent. */
  sessionDevices(user: string): Promise<Map<string, SessionDevice>>;
}

export interface RevocationFeed {
  /**
   * Calls `listener` with the id of each session revoked from now on: here, and (redis) by any
   * instance, through the revocation channel. Returns the unsubscribe function. Best effort: while the
   * channel is down, revocations elsewhere are not heard (holders recheck with isLive).
   */
  onRevoked(listener: (sid: string) => void): () => void;
}

export interface StoreHealth {
  /**
   * Readiness (/readyz): resolves while this instance can serve sessions. A master that accepts writes
   * (single node, Sentinel); a Cluster with at least one reachable master whose cluster_state is ok (a
   * partial outage fails the sessions of the lost slots, on every instance alike: taking instances out
   * would help none; with cluster-require-full-coverage yes a lost master stops the whole cluster).
   * Never waits behind a replica wait.
   */
  ping(): Promise<void>;
  /** Replication as last seen (redis with store.waitForReplicas); undefined when not waiting for replicas. */
  replication(): ReplicationStats | undefined;
  /** Resolves true once connected, or false after `timeoutMs`; never throws (the memory store: at once). */
  waitUntilReady(timeoutMs: number): Promise<boolean>;
}

/** What a backend implements: every role. */
export interface SessionStore extends Sessions, RevocationFeed, StoreHealth, StoreLifecycle {}

export interface NewSession {
  sub: string;
  /** The user's credential version when the session began. */
  uv: string;
}

export interface Rotation {
  /** The generation of the presented refresh token (its MAC already checked). */
  generation: number;
  ttlSeconds: number;
  /**
   * Above 0: the token just rotated away, presented again before its successor was used (however long
   * after the rotation), is a retry and gets the same successor. 0: every second use is reuse.
   */
  graceMs: number;
  nowMs: number;
}

export type RotateOutcome =
  /** `generation`: the successor's. `retry`: the presented token had been rotated already, within grace. */
  | { result: 'rotated'; sub: string; uv: string; generation: number; retry: boolean }
  /** No such session. */
  | { result: 'unknown' }
  /** A rotated-away token whose successor was used (or any, with graceMs 0): the session is revoked. */
  | { result: 'reused' };

/** Where a session was made from: shown to its user (never trusted as HTML). */
export interface SessionDevice {
  /** The client's address as the gateway saw it (its trusted proxies' forwarded address). */
  address: string;
  /** The User-Agent header, cut to MAX_NOTED_USER_AGENT characters; '' without one. */
  userAgent: string;
}

/** The longest User-Agent a device note keeps. */
export const MAX_NOTED_USER_AGENT = 512;

/** What an operator may know about a session: never a token. */
export interface SessionInfo {
  sid: string;
  createdAtMs: number;
  /** When its refresh token was last rotated (= createdAtMs until then). */
  refreshedAtMs: number;
}
