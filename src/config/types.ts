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
  /** The admin listener (/metrics, /healthz, /readyz); false: none. */
  admin: AdminConfig | false;
  /** The forward-auth endpoint (nginx auth_request, Caddy forward_auth, Traefik ForwardAuth); undefined: none. */
  forwardAuth: ForwardAuthConfig | undefined;
  identity: IdentityConfig;
  /** Browser sign-in at an OpenID provider (src/config/login.ts); undefined: none. */
  login?: LoginConfig;
}

/** `login`: browser sign-in with the authorization code flow and PKCE (docs/openid.md). */
export interface LoginConfig {
  /** The identity.issuers entry (by name) browsers sign in at. */
  issuer: string;
  clientId: string;
  /** undefined: a public client (PKCE only). */
  clientSecret: string | undefined;
  scopes: string[];
  callbackPath: string;
  logoutPath: string;
  backchannelLogoutPath: string;
  sessionTtlSeconds: number;
  cookieName: string;
  /** The public origin (scheme://host[:port], no path); undefined: from the request. */
  publicUrl: string | undefined;
}

export interface ForwardAuthConfig {
  /** The exact path (any method) answered about the request the proxy describes. */
  path: string;
  /** Addresses and CIDR blocks of the callers allowed to ask (the TCP peer); undefined: any caller. */
  trustedProxies: string[] | undefined;
}

export interface IdentityConfig {
  /** Signed identity assertions to upstreams and in forward-auth answers; undefined: none. */
  assertion: AssertionConfig | undefined;
  /** OpenID providers whose bearer tokens are accepted (src/config/issuers.ts); empty: none. */
  issuers: IssuerConfig[];
}

/** Signature algorithms an issuer may use (asymmetric only: never HS*, never none). */
export type IssuerAlg = 'RS256' | 'RS384' | 'RS512' | 'PS256' | 'PS384' | 'PS512' | 'ES256' | 'ES384' | 'ES512' | 'EdDSA';

/** One OpenID provider whose JWT bearer tokens are verified against its published keys. */
export interface IssuerConfig {
  /** In logs, metrics and `config check --connect`. */
  name: string;
  /** Equal to the tokens' `iss`, exactly. */
  issuer: string;
  /** The JWK Set's URL; undefined: `jwks_uri` of `<issuer>/.well-known/openid-configuration`. */
  jwksUri: string | undefined;
  /** A token's `aud` must contain one of these. */
  audiences: string[];
  algorithms: IssuerAlg[];
  /** The claim naming the user (a dotted path). */
  userClaim: string;
  /** The claim holding the user's groups (a dotted path to a string array); undefined: no groups. */
  groupsClaim: string | undefined;
  /** Absolute path of a PEM file of CA certificates trusted for the provider's TLS, beside the system's. */
  caFile: string | undefined;
  clockSkewSeconds: number;
}

export interface AssertionConfig {
  /** The header that carries the assertion (a client's copy is always removed). */
  header: string;
  alg: 'ES256' | 'RS256' | 'EdDSA';
  /** Absolute path of the PEM file: one or more keys; the first private key signs, every key is published. */
  keyFile: string;
  ttlSeconds: number;
}

export interface AdminConfig {
  host: string;
  port: number;
}

/** HTTPS on the public port; the files are re-read when they change. */
export interface TlsConfig {
  /** Absolute paths of the PEM certificate (chain) and private key. */
  certFile: string;
  keyFile: string;
  /** How often the files are checked for a change. */
  reloadIntervalMs: number;
}

export interface ServerConfig {
  host: string;
  port: number;
  /** Reverse proxies in front of the gateway whose X-Forwarded-For entries are trusted (0 = none). */
  trustProxy: number;
  /** In-flight requests get this long to finish on SIGTERM/SIGINT, once new connections are refused. */
  shutdownGraceMs: number;
  /**
   * On SIGTERM /readyz answers 503 at once, and connections are still accepted (and served) this long
   * before the listener closes: a load balancer's health checks need that long to take the instance out.
   * SIGINT (Ctrl-C at a terminal) skips it.
   */
  acceptGraceMs: number;
  /** The request line and headers must arrive within this (Node's headersTimeout). */
  headersTimeoutMs: number;
  /** A token request's whole body must arrive within this; proxied bodies have an idle limit instead. */
  bodyTimeoutMs: number;
  /** Requests parsed ahead and waiting on one connection; past it the connection closes after the answer in progress. */
  maxPipelinedRequests: number;
  /** Serve HTTPS with these files; undefined: plain HTTP. */
  tls?: TlsConfig;
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
  /**
   * While fewer replicas than waitForReplicas are connected: `available` acknowledges session writes
   * without them (one warning, counted), `strict` refuses them (503). Default available.
   */
  durability: 'available' | 'strict';
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
  /** Reload the file when it changes (the groups file too). */
  watch: boolean;
  /** Absolute path of an Apache htgroup file (`group: user1 user2`); undefined: no groups. */
  groups?: string;
  /** bcrypt checks allowed to wait for the thread pool at once; past it, 503. */
  maxPendingVerifications: number;
}

export interface TokensConfig {
  issuer: string;
  audience: string;
  accessTtlSeconds: number;
  refreshTtlSeconds: number;
  /**
   * Above 0 (default 10): a refresh retried with the token just rotated away, before its successor was
   * used, gets the same successor however long after the rotation; once the successor was used, it is
   * reuse and revokes the session. 0: every second use is reuse.
   */
  refreshReuseGraceSeconds: number;
  /** The key refresh tokens are derived with (at least 32 bytes); default: derived from tokens.signing. */
  refreshSecret?: string;
  signing: SigningKeyConfig;
  /** Keys that still verify but no longer sign (key rotation). */
  verificationKeys: VerificationKeyConfig[];
  /** CORS of POST /v1/tokens/*; undefined: none (cross-origin browser calls fail). */
  cors?: CorsPolicy;
}

export type SigningKeyConfig =
  | { alg: 'HS256'; secret: string; kid?: string }
  | { alg: 'RS256' | 'ES256'; privateKeyFile: string; kid?: string };

export type VerificationKeyConfig =
  | { alg: 'HS256'; secret: string; kid?: string }
  | { alg: 'RS256' | 'ES256'; publicKeyFile: string; kid?: string };

export interface LockoutConfig {
  /** Failed password checks of one user name from one address within the window before that pair gets 429. */
  maxFailuresPerUser: number;
  /** Consecutive failed checks of one user name from all addresses before the account gets 429 (NIST SP 800-63B: at most 100). */
  maxFailuresPerAccount: number;
  windowSeconds: number;
  /** Failed checks an address may make at once before it is slowed down. */
  addressBurst: number;
  /** After the burst: failed checks an address may make per minute (the throttle's refill rate). */
  addressFailuresPerMinute: number;
}

export interface UpstreamConfig {
  /** The first target (the one-target form of the configuration). */
  url: string;
  /** Every target's base URL (`url` is one target). */
  targets: string[];
  /** How a request picks a target. */
  balance: 'round-robin' | 'least-requests';
  /** A target that refused a connection is skipped this long (passive health). */
  cooldownMs: number;
  /** Probed actively when set: a target answering other than 2xx/3xx is taken out until it does. */
  healthCheck?: { path: string; intervalMs: number; timeoutMs: number };
  timeouts: Timeouts;
  /** Send the client's Host header instead of the upstream's own (for backends that build URLs from it). */
  preserveHost: boolean;
  /** Connections the gateway opens to each target at most (its agent's maxSockets). */
  maxConnections: number;
  /** Requests that may wait for one of those connections, per target; past it, 503 service_unavailable. */
  maxQueued: number;
  /** WebSocket tunnels open (or opening) to this upstream at most, all targets together; past it, 503. */
  maxTunnels: number;
}

/** What each timeout measures, so a slow upload or a quiet stream is never mistaken for a dead upstream. */
export interface Timeouts {
  /** Opening a new connection to the upstream. */
  connectMs: number;
  /** Response headers, counted from the moment the request body has been sent in full. */
  responseMs: number;
  /** No bytes in either direction while a body (request or response) is streaming. */
  idleMs: number;
}

export interface RouteConfig {
  path: string;
  /** undefined only with forwardAuth: the route is then matched for its rules, never forwarded to. */
  upstream: string | undefined;
  /** Who may use the route; undefined: every authenticated user. */
  allow?: AllowConfig;
  /** The `aud` of identity assertions on this route; undefined: the upstream's name (else the route's path). */
  audience?: string;
  /** Browser navigations without credentials are sent to sign in (`login`); undefined: no. */
  login?: boolean;
  /** Pass the client's Authorization header on to the upstream. */
  forwardAuthorization: boolean;
  /** Remove the route's path from the request path and join the rest onto the upstream URL's path. */
  stripPrefix: boolean;
  /** This route's own timeouts (each falls back to the upstream's). */
  timeouts: Timeouts;
  /** Request-target and method override headers the upstream may see on this route (lower case). */
  allowHeaders: string[];
  paging?: PagingRules;
  /** This route's own limit; null: none even when a global one is set; undefined: the global one. */
  rateLimit?: RateLimitRule | null;
  /** Proxy WebSocket upgrades (undefined: yes); false answers them 403 websocket_not_allowed. */
  websocket?: boolean;
  /** CORS of this route; undefined: none (the upstream's own CORS headers pass unchanged). */
  cors?: CorsPolicy;
}

/** Which browser origins may call, and what they may send and read (the Fetch standard's CORS protocol). */
export interface CorsPolicy {
  /** Exact origins (`https://app.example.com`), or '*' for any (only without credentials). */
  origins: string[] | '*';
  /** Methods a preflight may ask for (upper case). */
  methods: string[];
  /** Request headers a preflight may ask for (lower case). */
  headers: string[];
  /** Response headers the browser lets the page read (Access-Control-Expose-Headers). */
  exposedHeaders: string[];
  /** Access-Control-Allow-Credentials: the browser may send cookies or its own HTTP authentication. */
  credentials: boolean;
  /** How long a browser may cache a preflight's answer. */
  maxAgeSeconds: number;
}

/** A route's allow rule: a user listed in `users` or in one of `groups`, and (when given) a method listed in `methods`. */
export interface AllowConfig {
  users?: string[];
  groups?: string[];
  /** Upper case. */
  methods?: string[];
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
