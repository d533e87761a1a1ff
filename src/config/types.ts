import type { LogLevel } from '../log.js';

export interface Config {
  /** Absolute path of the file this was loaded from ('' when built in code). */
  file: string;
  server: ServerConfig;
  store: StoreConfig;
  users: UsersConfig;
  tokens: TokensConfig;
  lockout: LockoutConfig;
  /** Per-principal request limit for proxied requests; undefined: none (routes may still set one). */
  rateLimit: RateLimitRule | undefined;
  upstreams: Record<string, UpstreamConfig>;
  routes: RouteConfig[];
  log: { level: LogLevel; access: boolean };
}

export interface ServerConfig {
  host: string;
  port: number;
  /** Reverse proxies in front of the gateway whose X-Forwarded-For entries are trusted (0 = none). */
  trustProxy: number;
  /** In-flight requests get this long to finish on SIGTERM/SIGINT. */
  shutdownGraceMs: number;
  /** Worker processes sharing the port (node:cluster); 1: serve in this process. `auto` is resolved to the cores. */
  workers: number;
}

export type StoreConfig = { kind: 'memory' } | RedisStoreConfig;

export interface RedisStoreConfig {
  kind: 'redis';
  /** Exactly one of a single node (`url`), a Redis Cluster or a Sentinel-managed master. */
  topology: RedisTopology;
  keyPrefix: string;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  livenessCacheMs: number;
  /**
   * Replicas that must acknowledge a session write (WAIT) before it is answered; 0: do not wait.
   * Default 1 with Sentinel, 0 otherwise.
   */
  waitForReplicas: number;
}

export type RedisTopology =
  | { mode: 'single'; url: string }
  /** Seed nodes as redis:// or rediss:// URLs; username, password and TLS are taken from the first. */
  | { mode: 'cluster'; nodes: string[] }
  | { mode: 'sentinel'; name: string; sentinels: string[]; password?: string; sentinelPassword?: string; tls: boolean };

export interface UsersConfig {
  /** Absolute path of the htpasswd file. */
  htpasswd: string;
  /** How long a verified user:password stays cached in memory. */
  cacheTtlSeconds: number;
  /** Reload the file when it changes. */
  watch: boolean;
  /** bcrypt checks allowed to wait for the thread pool at once; past it, 503. */
  maxPendingVerifications: number;
}

export interface TokensConfig {
  issuer: string;
  audience: string;
  accessTtlSeconds: number;
  refreshTtlSeconds: number;
  refreshReuseGraceSeconds: number;
  signing: SigningKeyConfig;
  /** Keys that still verify but no longer sign (key rotation). */
  verificationKeys: VerificationKeyConfig[];
}

export type SigningKeyConfig =
  | { alg: 'HS256'; secret: string; kid?: string }
  | { alg: 'RS256' | 'ES256'; privateKeyFile: string; kid?: string };

export type VerificationKeyConfig =
  | { alg: 'HS256'; secret: string; kid?: string }
  | { alg: 'RS256' | 'ES256'; publicKeyFile: string; kid?: string };

export interface LockoutConfig {
  /** Failed password checks per user name within the window before 429. */
  maxFailuresPerUser: number;
  /** Failed password checks per client address within the window before 429. */
  maxFailuresPerAddress: number;
  windowSeconds: number;
}

export interface UpstreamConfig {
  url: string;
  timeoutMs: number;
}

export interface RouteConfig {
  path: string;
  upstream: string;
  /** Pass the client's Authorization header on to the upstream. */
  forwardAuthorization: boolean;
  paging?: PagingRules;
  /** This route's own limit; null: none even when a global one is set; undefined: the global one. */
  rateLimit?: RateLimitRule | null;
}

export interface RateLimitRule {
  /** Requests each principal may make per window (also the burst). */
  requests: number;
  windowSeconds: number;
}

export interface PagingRules {
  sizes: number[];
  defaultSize: number;
  sortable: string[];
}
