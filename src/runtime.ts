import type Koa from 'koa';
import { authenticate } from './auth/authenticate.js';
import type { Authenticator } from './auth/authenticator.js';
import { basicAuthenticator } from './auth/basic.js';
import { bearerAuthenticator } from './auth/bearer.js';
import { oidcAuthenticator } from './auth/oidc.js';
import type { ClientCertificates } from './auth/peer-certificates.js';
import { mtlsAuthenticator } from './auth/mtls.js';
import { apiKeyAuthenticator } from './auth/api-key.js';
import type { ApiKeys } from './stores/tables/api-keys.js';
import type { StoreUsers } from './stores/tables/store-users.js';
import { allowGroupsFor } from './authz/store-groups.js';
import { allowRules } from './pipeline/steps/allow.js';
import { answerForwardAuth, forwardAuthEntry } from './pipeline/steps/forward-auth.js';
import { relayRefusals, replayRefusal } from './pipeline/refusal-relay.js';
import { GroupsFile, noGroups, type Groups } from './authz/groups.js';
import type { Clock } from './clock.js';
import type { Config } from './config/types.js';
import { Credentials } from './credentials/credentials.js';
import { Lockout } from './credentials/lockout.js';
import { PasswordCheck } from './credentials/password-check.js';
import { endedUsers } from './credentials/password-verifier.js';
import { DirectoryUsers } from './credentials/directory-users.js';
import { UserSources } from './credentials/user-sources.js';
import { DirectoryGroups, fileGroupsOf } from './authz/groups-with-directory.js';
import { directoryGroups } from './pipeline/steps/directory-groups.js';
import { originPolicy } from './pipeline/steps/origin.js';
import { HttpProblem } from './http/problem.js';
import { requestForm } from './http/request-form.js';
import type { GatewayExchange, GatewayState } from './http/state.js';
import type { Logger } from './log.js';
import { paging } from './pipeline/steps/paging.js';
import { forward, tunnel } from './pipeline/hand-offs.js';
import { ownEndpoints, type OwnHandler } from './pipeline/own-endpoints.js';
import { pipeline } from './pipeline/pipeline.js';
import type { UpstreamErrorListener } from './proxy/forward.js';
import { Forwarders } from './proxy/forwarders.js';
import { route } from './pipeline/steps/route.js';
import { rateLimit } from './pipeline/steps/rate-limit.js';
import { RouteTable } from './routes/route-table.js';
import type { Tunnels } from './proxy/tunnels.js';
import { upstreamHeaders } from './pipeline/steps/upstream-headers.js';
import { AccessTokenCodec } from './tokens/access-token.js';
import { credentialVersionKey, keyedCredentialVersions, loadKeys } from './tokens/keys.js';
import { tokenRoutes } from './http/token-endpoints.js';
import { TokenService } from './tokens/service.js';
import type { RateBuckets, WindowCounters } from './stores/counters/counter-store.js';
import { refreshKey } from './tokens/refresh-token.js';
import type { Sessions } from './stores/sessions/session-store.js';
import { AssertionSigner } from './identity/assertion.js';
import { assertions, type Assertions } from './identity/identity-headers.js';
import { serveJwks } from './identity/jwks.js';
import { loadAssertionKeys, type AssertionKeys } from './identity/assertion-keys.js';
import { IssuerKeys, type KeyFetchListener } from './identity/issuer-keys.js';
import { cookieSessionAuthenticator } from './auth/cookie-session.js';
import { LoginFlow } from './auth/login.js';
import { derivedKey } from './tokens/keys.js';
import { Sealer } from './auth/seal.js';
import { signInEndpoints, withSignIn } from './pipeline/sign-in.js';

/** What lives as long as the process, whatever the configuration says. */
export interface Shared {
  clock: Clock;
  log: Logger;
  /** The stores every part calls (timed for the metrics), as the roles they use: the sessions, and the lockout's and rate limits' counters. */
  store: Sessions;
  counters: WindowCounters & RateBuckets;
  ping: () => Promise<void>;
  /** Which writes the store refuses while ready (see readyz). */
  refused: () => string | undefined;
  onUpstreamError: UpstreamErrorListener;
  /** Counts each fetch of an OpenID provider's keys. */
  onKeyFetch?: KeyFetchListener;
  /** The open WebSocket tunnels (they outlive a reload). */
  tunnels: Tunnels;
  /** Answers a request with one of the gateway's own endpoints (the Koa application). */
  serveOwn: (ex: GatewayExchange, handler: OwnHandler) => Promise<void>;
  /** The client certificates of the listener's connections (server.tls.clientCa); undefined: none asked for. */
  clientCertificates?: ClientCertificates;
  /** The API keys of the store, when the configuration at start had `apiKeys`. */
  apiKeys?: ApiKeys;
  /** The users kept in the store, when the configuration at start had `users.store`. */
  storeUsers?: StoreUsers;
}

/**
 * Everything built from one configuration: the route table, the upstream pools, the users, the keys,
 * the limits, and the chain of steps a request takes through them. A request picks up the runtime in
 * force when it arrives and finishes on it; a reload builds a new one beside it and swaps.
 */
export interface Runtime {
  config: Config;
  routes: RouteTable;
  forwarder: Forwarders;
  credentials: Credentials;
  /** Who is in which group (the htgroup file of users.groups, and the directory's groups of users.ldap). */
  groups: Groups;
  /** The groups the allow rules read: `groups`, and the store's users' groups with users.store. */
  allowGroups: Groups;
  /** The users of the htpasswd file and of the directory (users.ldap), as one password source. */
  users: UserSources;
  lockout: Lockout;
  passwords: PasswordCheck;
  tokens: TokenService;
  /** The identity assertions (signer and header), when configured. */
  assertions?: Assertions;
  /** The OpenID providers' key caches (identity.issuers); kept across reloads while an issuer's settings stay. */
  issuers: readonly IssuerKeys[];
  /** Browser sign-in (login), when configured; kept across reloads while its settings and issuer stay. */
  login?: LoginFlow;
  /** The identity sources the authenticate step asks, in order. */
  authenticators: readonly Authenticator[];
  /**
   * One request's way through: the request form, then the own-endpoint lookup (health, /openapi.json,
   * /.well-known/jwks.json, CORS preflights, /v1/tokens/*) or else the pipeline (authenticate → route →
   * allow → origin → rate limit → paging → upstream headers → hand-off: forward | tunnel | answer).
   */
  handle: (ex: GatewayExchange) => void | Promise<void>;
}

/**
 * Builds a runtime. With `previous`, parts whose configuration did not change are kept (the upstream
 * pools with their keep-alive connections and health, the users with their verified-password cache);
 * throws (and builds nothing that outlives the call) when the configuration cannot be served.
 */
export function buildRuntime(config: Config, shared: Shared, previous?: Runtime): Runtime {
  const { clock, log, store } = shared;
  const keys = loadKeys(config.tokens);
  const assertionKeys = config.identity.assertion ? loadAssertionKeys(config.identity.assertion.keyFile, config.identity.assertion.alg) : undefined;
  const routes = new RouteTable(config.routes, config.upstreams, config.rateLimit);
  const sameUsers = previous !== undefined && same(previous.config.users, config.users);
  const ended = (users: string[]) => void endSessions(store, users, log);
  const credentials = sameUsers ? previous.credentials : new Credentials(config.users, clock, log, ended);
  if (sameUsers) credentials.reload();
  // Users kept in the store, beside the file's (a new Credentials follows them; a kept one already does).
  else if (shared.storeUsers) credentials.follow(shared.storeUsers);
  // The groups file reloads with the users file (same watch setting; a reload reads both again).
  const fileGroups = sameUsers ? fileGroupsOf(previous.groups) : config.users.groups ? new GroupsFile(config.users.groups, log, config.users.watch) : noGroups;
  const directory = sameUsers ? previous.users.directory : config.users.ldap ? new DirectoryUsers(config.users.ldap, clock, log, config.users.maxPendingVerifications) : undefined;
  // A name not in the file may be a user of the store: its entry is checked fresh before it is trusted.
  const storeUsers = shared.storeUsers;
  const users = new UserSources(credentials.verifier, directory, storeUsers ? (user) => (credentials.inFile(user) ? undefined : storeUsers.confirm(user)) : undefined);
  const groups = directory ? new DirectoryGroups(fileGroups, users) : fileGroups;
  if (sameUsers && fileGroups instanceof GroupsFile) fileGroups.reload();
  // A user removed from a group loses an open tunnel on a route that needed the group at once.
  if (!sameUsers) groups.onChange(() => shared.tunnels.recheckNow());
  // Another users file: who was in the old one and is gone or changed in the new one ends too.
  else if (previous) ended(endedUsers(previous.credentials.verifier.table, credentials.verifier.table));
  // maxTunnels is read by the tunnel hand-off, not the Forwarder: changing it keeps the pools.
  const forwarder = previous !== undefined && same(previous.config.upstreams, config.upstreams, 'maxTunnels')
    ? previous.forwarder
    : new Forwarders(config.upstreams, log, shared.onUpstreamError, clock);
  const lockout = new Lockout(shared.counters, config.lockout, log, () => clock.now());
  // An address that failed stays one-at-a-time until its throttle's bucket could have refilled its burst.
  const narrowForMs = Math.ceil((config.lockout.addressBurst * 60_000) / config.lockout.addressFailuresPerMinute);
  const passwords = new PasswordCheck(users, lockout, { addressBurst: config.lockout.addressBurst, narrowForMs });
  const codec = new AccessTokenCodec(keys, {
    issuer: config.tokens.issuer,
    audience: config.tokens.audience,
    ttlSeconds: config.tokens.accessTtlSeconds,
  }, clock);
  // Tokens and sessions carry the credential version keyed (uv), not the verifier's plain fingerprint.
  const keyedVersion = keyedCredentialVersions(credentialVersionKey(config.tokens.refreshSecret, keys.signing.key));
  const tokens = new TokenService(codec, store, passwords, (user) => keyedVersion(users.credentialVersion(user)), {
    accessTtlSeconds: config.tokens.accessTtlSeconds,
    refreshTtlSeconds: config.tokens.refreshTtlSeconds,
    refreshReuseGraceSeconds: config.tokens.refreshReuseGraceSeconds,
    refreshKey: refreshKey(config.tokens.refreshSecret, keys.signing.key),
    // Sessions made before the keyed uv (release c247b92) carry the plain fingerprint; they keep it.
    unkeyedVersion: (user) => users.credentialVersion(user),
  }, clock);
  const trustForwarded = config.server.trustProxy > 0;
  // Store users' groups (users.store) for names not in the file; allow rules, open tunnels and the me page read them.
  const allowGroups = allowGroupsFor(groups, shared.storeUsers, credentials);
  const issuers = issuerKeysFor(config, shared, previous);
  const login = loginFor(config, issuers, shared, keys.signing.key, previous);
  const signed = assertionKeys ? assertionsFor(config, assertionKeys, clock, previous) : undefined;
  // The identity sources (docs/pipeline-extension.md: adding one). The authenticate step asks only the
  // one a request's credentials name (a header of its own, the Authorization scheme, a bearer token's
  // form); this order is that of the lookup, so the answers are those of asking them in turn.
  const authenticators: Authenticator[] = [
    // First: a key in its header beside any Authorization (Basic too) is refused before another source
    // could take the request on that Authorization. Without its header it takes only bearer keys (its prefix).
    ...(config.apiKeys && shared.apiKeys ? [apiKeyAuthenticator(shared.apiKeys, config.apiKeys)] : []),
    basicAuthenticator(passwords, (user) => users.credentialVersion(user)),
    // Each takes only bearer credentials of its own kind (its issuers' iss); the gateway's own take the rest.
    ...(issuers.length > 0 ? [oidcAuthenticator(issuers)] : []),
    bearerAuthenticator(tokens),
    ...(shared.clientCertificates ? [mtlsAuthenticator(shared.clientCertificates)] : []),
    // Last: a request's Authorization header (or certificate) decides before the browser's session cookie.
    ...(login ? [cookieSessionAuthenticator(login.cookieName, login.sealer, store, () => clock.now())] : []),
  ] as Authenticator[];
  // Refusals of forward-auth questions relayed through the proxy in front (nginx): one key on every instance.
  const refusals = new Sealer(derivedKey(config.tokens.refreshSecret, keys.signing.key, 'forward-auth refusals v1'));
  const findOwn = ownEndpoints(config, routes, {
    ping: shared.ping,
    refused: shared.refused,
    tokenEndpoints: onTokenPaths(tokenRoutes(tokens, config.server.bodyTimeoutMs, (token) => subjectOf(codec, token)).routes(), notATokenEndpoint),
    jwks: assertionKeys ? serveJwks(assertionKeys) : undefined,
    forwardAuth: config.forwardAuth ? { path: config.forwardAuth.path, enter: forwardAuthEntry(config.forwardAuth, replayRefusal(refusals, clock)) } : undefined,
    securitySchemes: authenticators.map((a) => a.securityScheme),
    more: login ? signInEndpoints(login, trustForwarded, config.server.bodyTimeoutMs, {
      passwords,
      credentialVersion: (user) => keyedVersion(users.credentialVersion(user)),
      groupsOf: (user) => allowGroups.of(user),
      bearer: (token) => tokens.verifyAccessToken(token),
    }) : undefined,
  });
  const consumed = config.apiKeys ? { header: config.apiKeys.header.toLowerCase(), bearerPrefix: `${config.apiKeys.prefix}_` } : undefined;
  const steps = pipeline([
    authenticate(authenticators),
    route(routes),
    ...(directory ? [directoryGroups(users, fileGroups)] : []),
    allowRules(allowGroups),
    originPolicy(trustForwarded),
    rateLimit(shared.counters),
    paging,
    upstreamHeaders(trustForwarded, signed, consumed, login ? (name) => login.isOwnCookie(name) : undefined),
  ], {
    forward: forward(forwarder),
    tunnel: tunnel(forwarder, shared.tunnels, (upstream) => config.upstreams[upstream]!.maxTunnels),
    answer: answerForwardAuth(signed, login ? (name) => login.isOwnCookie(name) : undefined),
  });
  const certificates = shared.clientCertificates;
  const runPipeline = login ? withSignIn(steps, login, routes, trustForwarded, shared.serveOwn) : steps;
  const handleOne = (ex: GatewayExchange) => {
    requestForm(ex);
    const own = findOwn(ex);
    // A client certificate presented but not verified: 401 on every request; a verified one is recorded.
    // Not on a forward-auth question: its connection is the asking proxy's, whose certificate is not the user's.
    if (certificates && ex.forwardAuth === undefined) certificates.screen(ex);
    return own ? shared.serveOwn(ex, own) : runPipeline(ex);
  };
  const handle = config.forwardAuth ? relayRefusals(handleOne, refusals, clock, log) : handleOne;
  return { config, routes, forwarder, credentials, groups, allowGroups, users, lockout, passwords, tokens, issuers, login, authenticators, handle, assertions: signed };
}

/** The sign-in of `login`: the previous runtime's (its discovery kept) while its settings, issuer and key are the same. */
function loginFor(config: Config, issuers: readonly IssuerKeys[], shared: Shared, signingKey: Parameters<typeof derivedKey>[1], previous: Runtime | undefined): LoginFlow | undefined {
  const login = config.login;
  if (!login) return undefined;
  const keys = login.providers.map((p) => issuers.find((i) => i.name === p.issuer)!);
  const key = derivedKey(config.tokens.refreshSecret, signingKey, 'sign-in cookies v1');
  const before = previous?.login;
  const sameKeys = before !== undefined && before.providers.length === keys.length && before.providers.every((p, i) => p.keys === keys[i]);
  if (before && sameKeys && same(before.config, login) && before.sealer.sameKey(key)) return before;
  return new LoginFlow(login, keys, shared.store, key, shared.clock, shared.log);
}

/** The key cache of each configured issuer: the previous runtime's while its settings are the same (its keys stay cached). */
function issuerKeysFor(config: Config, shared: Shared, previous: Runtime | undefined): IssuerKeys[] {
  return config.identity.issuers.map((issuer, i) => {
    const before = previous?.issuers.find((k) => same(k.config, issuer));
    if (before) return before;
    const keys = new IssuerKeys(issuer, shared.clock, shared.log, shared.onKeyFetch, i);
    keys.warm();
    return keys;
  });
}

/**
 * The assertion signer of a configuration: the previous runtime's (with its cache of signed
 * assertions) when the assertion settings, the keys and the issuer are the same, else a new one.
 */
function assertionsFor(config: Config, keys: AssertionKeys, clock: Clock, previous: Runtime | undefined): Assertions {
  const a = config.identity.assertion!;
  const before = previous?.assertions;
  if (before && same(previous.config.identity.assertion, a) && previous.config.tokens.issuer === config.tokens.issuer && before.signer.kid === keys.signing.kid) return before;
  return assertions(a, new AssertionSigner(keys, { issuer: config.tokens.issuer, ttlSeconds: a.ttlSeconds }, clock));
}

/**
 * Revokes every session of users whose htpasswd line was removed or changed (on every instance, as any
 * revocation). Each instance that reads the change does it; doing it twice is harmless. A store that
 * cannot answer now leaves the sessions to the credential check, which refuses them while the line stays
 * changed or gone; it is logged.
 */
async function endSessions(store: Sessions, users: string[], log: Logger): Promise<void> {
  for (const user of users) {
    try {
      const revoked = await store.revokeUser(user);
      log.info('sessions of a removed or changed user revoked', { user, sessions: revoked });
    } catch (err) {
      log.error('sessions of a removed or changed user not revoked; its tokens stay refused while its line is gone or changed', { user, error: (err as Error).message });
    }
  }
}

/** Lets go of what a replaced runtime held and the new one does not share, once its requests are done. */
export function retireRuntime(old: Runtime, current: Runtime): void {
  if (old.forwarder !== current.forwarder) old.forwarder.retire();
  if (old.credentials !== current.credentials) old.credentials.close();
  const oldFile = fileGroupsOf(old.groups);
  if (oldFile !== fileGroupsOf(current.groups) && oldFile instanceof GroupsFile) oldFile.close();
  if (old.users.directory !== current.users.directory) old.users.directory?.close();
}

/** Settings a running process cannot take over: listen address, TLS files, store, admin listener, log level. */
export function restartOnlyChanges(old: Config, next: Config): string[] {
  const changed: string[] = [];
  if (old.server.host !== next.server.host || old.server.port !== next.server.port) changed.push('server.host/server.port');
  if (!same(old.server.tls, next.server.tls)) changed.push('server.tls');
  if (!same(old.server.http2, next.server.http2)) changed.push('server.http2');
  if (old.server.h2c !== next.server.h2c) changed.push('server.h2c');
  if (!same(old.store, next.store)) changed.push('store');
  if (!same(old.admin, next.admin)) changed.push('admin');
  if (old.log.level !== next.log.level) changed.push('log.level');
  if (!same(old.tracing, next.tracing)) changed.push('tracing');
  if (old.server.workers !== next.server.workers) changed.push('server.workers');
  if ((old.apiKeys === undefined) !== (next.apiKeys === undefined)) changed.push('apiKeys (on or off)');
  if (old.users.store !== next.users.store) changed.push('users.store');
  return changed;
}

/** Whether two settings objects are the same, `ignored` keys left out at any depth. */
function same(a: unknown, b: unknown, ...ignored: string[]): boolean {
  const replacer = ignored.length === 0 ? undefined : (key: string, value: unknown) => (ignored.includes(key) ? undefined : value);
  return JSON.stringify(a, replacer) === JSON.stringify(b, replacer);
}

/** The token router as an own endpoint: what it leaves unanswered gets `fallback`, never the pipeline. */
function onTokenPaths<C>(middleware: Koa.Middleware<GatewayState, C>, fallback: () => never): OwnHandler {
  // The router adds its own context members (params, router) when it runs.
  return (ctx) => middleware(ctx as Parameters<typeof middleware>[0], async () => fallback()) as Promise<void>;
}

/** The user of an access token with a good signature (expired or not), for the access line; else undefined. */
function subjectOf(codec: AccessTokenCodec, token: string): string | undefined {
  try {
    return codec.verify(token, { ignoreExpiration: true }).sub;
  } catch {
    return undefined;
  }
}

function notATokenEndpoint(): never {
  throw new HttpProblem(404, 'not_found', 'not a token endpoint (create, refresh, revoke)');
}
