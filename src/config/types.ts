import type { Scalars } from './sections.js';

/*
 * The plain settings of a section (integers, booleans, strings, paths, enumerations) are typed from the
 * settings table (defaults.ts) by `Scalars<'section'>`: declared once there, with their meaning. What is
 * written out here is only what the table cannot type: lists, nested mappings, settings of two types and
 * values a reader derives (a default that depends on another setting).
 */

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
  log: LogConfig;
  /** OpenTelemetry traces; undefined: no `tracing` section (the environment may still turn tracing on). */
  tracing: TracingConfig | undefined;
  /** The admin listener (/metrics, /healthz, /readyz); false: none. */
  admin: AdminConfig | false;
  /** The forward-auth endpoint (nginx auth_request, Caddy forward_auth, Traefik ForwardAuth); undefined: none. */
  forwardAuth: ForwardAuthConfig | undefined;
  identity: IdentityConfig;
  /** API keys of the store (docs/service-credentials.md); undefined: none. */
  apiKeys: ApiKeysConfig | undefined;
  /** Browser sign-in at an OpenID provider (src/config/login-settings.ts); undefined: none. */
  login?: LoginConfig;
}

/** `login`: browser sign-in with the authorization code flow and PKCE (docs/openid.md). */
export type LoginConfig = Scalars<'login'> & {
  scopes: string[];
  /** The public origin (scheme://host[:port], no path); undefined: from the request. */
  publicUrl: string | undefined;
  /**
   * The providers browsers sign in at: `login.providers`, or the one of `login.issuer` (the earlier
   * form, a list of one); empty with `login.local` alone.
   */
  providers: LoginProviderConfig[];
  /** Where sign-out lands: an absolute URL as written, or a path of the gateway. */
  postLogoutRedirectUri: string;
  page: LoginPageConfig;
};

/** One provider of `login`. */
export interface LoginProviderConfig {
  /** The identity.issuers name. */
  issuer: string;
  clientId: string;
  clientSecret: string | undefined;
  scopes: string[];
  /** What its button says. */
  label: string;
}

/** `login.page`: the look of the sign-in pages. */
export type LoginPageConfig = Scalars<'login.page'> & {
  /** An absolute https:// URL or a path of the gateway; undefined: no logo. */
  logoUrl: string | undefined;
  /** Absolute; undefined: the built-in templates only. */
  templatesDir: string | undefined;
};

/** The header a key may come in (as written; any case matches; Authorization: Bearer works too) and the prefix keys start with. */
export type ApiKeysConfig = Scalars<'apiKeys'>;

/** `path`: the exact path (any method) answered about the request the proxy describes. */
export type ForwardAuthConfig = Scalars<'forwardAuth'> & {
  /** Addresses and CIDR blocks of the callers allowed to ask (the TCP peer); undefined: any caller. */
  trustedProxies: string[] | undefined;
};

export interface IdentityConfig {
  /** Signed identity assertions to upstreams and in forward-auth answers; undefined: none. */
  assertion: AssertionConfig | undefined;
  /** OpenID providers whose bearer tokens are accepted (src/config/issuer-settings.ts); empty: none. */
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

/** Signed identity assertions: header, alg, keyFile (absolute), ttlSeconds. */
export type AssertionConfig = Scalars<'identity.assertion'>;

/** The admin listener; with `apiToken` (its bearer secret) the admin API for API keys and store users is on. */
export type AdminConfig = Scalars<'admin'>;

/** Limits of HTTP/2 connections (server.http2). */
export type Http2Config = Scalars<'server.http2'>;

export type LogConfig = Scalars<'log'>;

/** OpenTelemetry traces (the section as written; the OTEL_* variables are applied by src/tracing/settings.ts). */
export type TracingConfig = Scalars<'tracing'> & {
  /** The collector's base URL; undefined: none (the environment may still name one). */
  endpoint: string | undefined;
  sampleRatio: number;
  headers: Record<string, string>;
};

/** HTTPS on the public port (absolute file paths); the files are re-read when they change. */
export type TlsConfig = Scalars<'server.tls'>;

/** Which part of a client certificate names the user. */
export type ClientUserFrom = TlsConfig['userFrom'];

export type ServerConfig = Scalars<'server'> & {
  /** Reverse proxies in front of the gateway whose X-Forwarded-For entries are trusted (0 = none; `true` is 1). */
  trustProxy: number;
  /** Serve HTTPS with these files; undefined: plain HTTP. */
  tls?: TlsConfig;
  /** Limits of HTTP/2 connections (used with tls.http2). */
  http2: Http2Config;
  /** Worker processes sharing the port (node:cluster); 1: serve in this process. `auto` is resolved to the cores. */
  workers: number;
};

export type StoreConfig = { kind: 'memory' } | RedisStoreConfig;

export type RedisStoreConfig = Omit<Scalars<'store'>, 'kind' | 'waitForReplicas'> & {
  kind: 'redis';
  /** Exactly one of a single node (`url`), a Redis Cluster or a Sentinel-managed master. */
  topology: RedisTopology;
  /** Replicas that must acknowledge a session write (WAIT); its default depends on the topology (1 with Sentinel, else 0). */
  waitForReplicas: number;
};

export type RedisTopology =
  | { mode: 'single'; url: string }
  /** Seed nodes as redis:// or rediss:// URLs; username, password and TLS are taken from the first. */
  | { mode: 'cluster'; nodes: string[] }
  | ({ mode: 'sentinel'; sentinels: string[] } & Scalars<'store.sentinel'>);

export type UsersConfig = Omit<Scalars<'users'>, 'groups' | 'htpasswd'> & {
  /** Absolute path of the htpasswd file; '' for none (another source is set). */
  htpasswd: string;
  /** Absolute path of an Apache htgroup file (`group: user1 user2`); undefined: no groups. */
  groups?: string;
  /** Users from an LDAP directory (docs/user-sources.md); undefined: none. */
  ldap?: LdapConfig;
};

/** `users.ldap`: a user is verified by binding as them; groups are the cn of the groups found. */
export type LdapConfig = Scalars<'users.ldap'> & {
  /** `ldap://` or `ldaps://` URL of the directory. */
  url: string;
};

export type TokensConfig = Omit<Scalars<'tokens'>, 'refreshSecret'> & {
  /** The key refresh tokens are derived with (at least 32 bytes); default: derived from tokens.signing. */
  refreshSecret?: string;
  signing: SigningKeyConfig;
  /** Keys that still verify but no longer sign (key rotation). */
  verificationKeys: VerificationKeyConfig[];
  /** CORS of POST /v1/tokens/*; undefined: none (cross-origin browser calls fail). */
  cors?: CorsPolicy;
};

export type SigningKeyConfig =
  | { alg: 'HS256'; secret: string; kid?: string }
  | { alg: 'RS256' | 'ES256'; privateKeyFile: string; kid?: string };

export type VerificationKeyConfig =
  | { alg: 'HS256'; secret: string; kid?: string }
  | { alg: 'RS256' | 'ES256'; publicKeyFile: string; kid?: string };

export type LockoutConfig = Scalars<'lockout'>;

/** How the gateway speaks to an upstream's targets (upstreams.<name>.protocol). */
type UpstreamProtocol = Scalars<'upstreams.<name>'>['protocol'];

export type UpstreamConfig = Omit<Scalars<'upstreams.<name>'>, 'timeoutMs' | 'protocol'> & {
  /** Always set by the validation; left out (HTTP/1.1) only by code that builds a configuration by hand. */
  protocol?: UpstreamProtocol;
  /** The first target (the one-target form of the configuration). */
  url: string;
  /** Every target's base URL (`url` is one target). */
  targets: string[];
  /** Probed actively when set: a target answering other than 2xx/3xx is taken out until it does. */
  healthCheck?: Scalars<'upstreams.<name>.healthCheck'>;
  timeouts: Timeouts;
};

/** What each timeout measures, so a slow upload or a quiet stream is never mistaken for a dead upstream. */
export type Timeouts = Scalars<'upstreams.<name>.timeouts'>;

/**
 * A route: `path`, `upstream` (undefined only with forwardAuth: matched for its rules, never forwarded to),
 * `forwardAuthorization`, `stripPrefix` and `audience` typed from the settings table; the rest here.
 */
export type RouteConfig = Omit<Scalars<'routes[]'>, 'websocket' | 'login'> & {
  /** Who may use the route; undefined: every authenticated user. */
  allow?: AllowConfig;
  /** Browser navigations without credentials are sent to sign in (`login`); undefined: no. */
  login?: boolean;
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
};

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

/** Requests each principal may make per window (also the burst), and the window. */
export type RateLimitRule = Scalars<'rateLimit'>;

export type PagingRules = Scalars<'routes[].paging'> & {
  sizes: number[];
  sortable: string[];
};
