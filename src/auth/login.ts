import { createHash, randomBytes } from 'node:crypto';
import * as oidc from 'openid-client';
import type { Clock } from '../clock.js';
import type { LoginConfig, LoginProviderConfig } from '../config/types.js';
import { isLoopback } from '../config/issuer-settings.js';
import { DomainError } from '../core/domain-error.js';
import { isUsableName } from '../core/headers.js';
import type { IssuerKeys } from '../identity/issuer-keys.js';
import { KeysUnavailable } from '../identity/issuer-keys.js';
import { InvalidLogoutToken, verifyLogoutToken } from '../identity/logout-token.js';
import { fetchFailure, providerCa, providerFetch } from '../identity/provider-fetch.js';
import { claimAt } from '../identity/provider-jwt.js';
import type { Logger } from '../log.js';
import { MAX_NOTED_USER_AGENT, type SessionDevice, type SessionInfo, type Sessions } from '../stores/sessions/session-store.js';
import { openSession, SESSION_PURPOSE, type BrowserSession } from './cookie-session.js';
import { groupsOf } from './oidc.js';
import { Sealer } from './seal.js';

/** How long a sign-in may take between the redirect to the provider and the callback. */
export const LOGIN_STATE_TTL_S = 600;
/** After a failed discovery, the next sign-in tries again no sooner than this. */
const DISCOVERY_RETRY_MS = 10_000;
const STATE_PURPOSE = 'sign-in state v1';
const FORM_PURPOSE = 'sign-in form v1';
/** How long a page's form token is good for (a person reading the page, typing, coming back from a break). */
export const FORM_TOKEN_TTL_S = 3600;
/** The credential version of browser sessions (they are proved by the provider, not the htpasswd file). */
const LOGIN_SESSION_UV = 'oidc';
/** Browsers keep cookies up to 4096 bytes (name, value and attributes). */
const MAX_COOKIE_VALUE = 3800;
const MAX_RETURN_PATH = 2048;

/** Where a browser signs in from: the client's address and its User-Agent header (absent: none). */
export interface SigningInClient {
  address: string;
  userAgent: string | undefined;
}

/** A session as its user sees it: where it was made from, when a sign-in of this release noted it. */
export interface ListedSession extends SessionInfo {
  device: SessionDevice | undefined;
}

interface LoginState {
  /** PKCE code verifier, state, nonce. */
  v: string;
  s: string;
  n: string;
  /** Where to go back to (a same-origin path). */
  r: string;
  /** The redirect_uri sent (the callback URL). */
  c: string;
  /** Expiry, ms. */
  e: number;
  /** The provider's name (absent in a state of the last release: its one provider). */
  p?: string;
}

/** A form token: the nonce of the browser's form cookie it is bound to, and its expiry (ms). */
interface FormToken {
  n: string;
  e: number;
}

/**
 * Browser sign-in at one OpenID provider with openid-client (a certified relying-party library):
 * discovery with the issuer's caFile, the authorization code flow with PKCE S256, state and nonce sealed
 * in a short-lived HttpOnly cookie, the code exchange and the ID token's checks (issuer, audience, nonce,
 * signature, expiry). A signed-in browser gets a gateway session in the store (the same sessions as
 * token sessions: listed, revoked, ended everywhere at once) filed under the provider's session and
 * user for back-channel logout, and a cookie holding a sealed handle of it. The HTTP side (own
 * endpoints, redirects, cookies on the answer) is src/pipeline/sign-in.ts.
 */
export class LoginFlow {
  readonly sealer: Sealer;
  /** The providers browsers sign in at, in the order of login.providers; empty with `login.local` alone. */
  readonly providers: readonly LoginProvider[];

  constructor(
    readonly config: LoginConfig,
    /** The identity.issuers entry of each of config.providers, in its order. */
    issuers: readonly IssuerKeys[],
    private readonly store: Sessions,
    sealingKey: Buffer,
    readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.sealer = new Sealer(sealingKey);
    this.providers = config.providers.map((p, i) => new LoginProvider(p, issuers[i]!, config.callbackPath, clock, log));
  }

  /**
   * Whether a browser without credentials goes to the gateway's sign-in page (the form for its own
   * users) rather than straight to the provider.
   */
  get offersPage(): boolean {
    return this.config.local || this.providers.length !== 1;
  }

  /**
   * The provider of that name, or without a name the only one; `invalid_request` for a name that is none
   * of them, or no name among several (the sign-in page offers each); `not_found` without any provider.
   */
  provider(name?: string): LoginProvider {
    if (this.providers.length === 0) throw new DomainError('not_found', 'this gateway signs in its own users only (no OpenID provider in login)');
    if (name === undefined) {
      if (this.providers.length === 1) return this.providers[0]!;
      throw new DomainError('invalid_request', 'name the provider to sign in at (the sign-in page offers each)');
    }
    const found = this.providers.find((p) => p.name === name);
    if (!found) throw new DomainError('invalid_request', `no provider of sign-in is named ${JSON.stringify(name)}`);
    return found;
  }

  /** The cookie that holds a browser session's sealed handle. */
  get cookieName(): string {
    return this.config.cookieName;
  }

  /**
   * The cookie that holds a sign-in's state until its callback: one per sign-in (named by a digest of
   * its `state`), so two tabs signing in at once do not overwrite each other's.
   */
  stateCookieName(state: string): string {
    return `${this.config.cookieName}-login-${createHash('sha256').update(state).digest('base64url').slice(0, 12)}`;
  }

  /** The cookie that binds the form tokens of the gateway's pages to this browser (see formToken). */
  get formCookieName(): string {
    return `${this.config.cookieName}-form`;
  }

  /** Whether a cookie name is one of the gateway's own (the session, a sign-in's state, the form cookie). */
  isOwnCookie(name: string): boolean {
    return name === this.config.cookieName || name === this.formCookieName || name.startsWith(`${this.config.cookieName}-login-`);
  }

  /** A new value for the form cookie: a random nonce the form tokens are bound to. */
  newFormNonce(): string {
    return randomBytes(18).toString('base64url');
  }

  /**
   * The hidden field of a page's form (sign-in, sign-out): a short-lived value sealed with the nonce of
   * the browser's form cookie. Another site can make a browser post a form, but neither read this
   * value nor set that cookie (`__Host-`, HttpOnly): with the Origin check, a cross-site post is refused.
   */
  formToken(nonce: string): string {
    const token: FormToken = { n: nonce, e: this.clock.now() + FORM_TOKEN_TTL_S * 1000 };
    return this.sealer.seal(FORM_PURPOSE, token);
  }

  /** 'ok', or why a posted form token does not go with this browser's form cookie ('expired' is the one a person can fix by posting again). */
  checkFormToken(token: string | undefined, nonce: string | undefined): 'ok' | 'expired' | 'forged' {
    if (token === undefined || nonce === undefined || nonce === '') return 'forged';
    const opened = this.sealer.open(FORM_PURPOSE, token) as Partial<FormToken> | undefined;
    if (!opened || typeof opened.n !== 'string' || typeof opened.e !== 'number' || opened.n !== nonce) return 'forged';
    return opened.e > this.clock.now() ? 'ok' : 'expired';
  }

  /**
   * A sign-in of one of the gateway's own users, whose password PasswordCheck has just accepted: the
   * same store session and cookie as a provider sign-in (listed, revoked, ended everywhere at once);
   * `uv` is the user's credential version, as a token session keeps it. The session's groups are not
   * in the cookie: they are the user's groups at each request (users file, store, directory), as for Basic.
   */
  async signInLocal(user: string, uv: string, client: SigningInClient): Promise<string> {
    const ttl = this.config.sessionTtlSeconds;
    const sid = await this.store.createSession({ sub: user, uv }, ttl);
    await this.noteDevice(sid, user, client, ttl);
    const session: BrowserSession = { sid, user, groups: [], exp: Math.floor(this.clock.now() / 1000) + ttl, local: true };
    this.log.info('browser signed in', { user, by: 'password', sid });
    return this.sealer.seal(SESSION_PURPOSE, session);
  }

  /**
   * The origins a form of the gateway's pages may end up at through redirects (a page's CSP form-action
   * applies to them too): the provider's authorization and end-session endpoints (the issuer's origin
   * while discovery is not done) and an absolute postLogoutRedirectUri.
   */
  async formTargets(): Promise<string[]> {
    const origins = new Set<string>();
    const configured = this.config.postLogoutRedirectUri;
    if (!configured.startsWith('/')) origins.add(new URL(configured).origin);
    for (const provider of this.providers) {
      origins.add(new URL(provider.issuer).origin);
      try {
        const m = (await provider.discovery()).serverMetadata();
        for (const endpoint of [m.authorization_endpoint, m.end_session_endpoint]) if (endpoint) origins.add(new URL(endpoint).origin);
      } catch {
        // The issuer's origin alone: the page still works for the gateway's own users.
      }
    }
    return [...origins];
  }

  /**
   * The live browser session a cookie holds (opened, not expired, live in the store), else undefined.
   * For the gateway's own pages (own endpoints, which the pipeline's authenticate step does not see).
   */
  async liveSession(cookie: string | undefined): Promise<BrowserSession | undefined> {
    if (cookie === undefined || cookie === '') return undefined;
    const session = openSession(this.sealer, cookie);
    if (!session || session.exp <= this.clock.now() / 1000) return undefined;
    return (await this.store.isLive(session.sid)) ? session : undefined;
  }

  /**
   * The user's live sessions (browser and token sessions alike), oldest first, each with where it was
   * made from when a browser sign-in noted it. Notes that cannot be read now leave every device unknown.
   */
  async sessionsOf(user: string): Promise<ListedSession[]> {
    const [sessions, devices] = await Promise.all([
      this.store.listSessions(user),
      this.store.sessionDevices(user).catch((err: unknown) => {
        this.log.debug('the devices of the sessions were not read; they show as unknown', { user, error: String(err) });
        return new Map<string, SessionDevice>();
      }),
    ]);
    return sessions.map((s) => ({ ...s, device: devices.get(s.sid) }));
  }

  /**
   * Notes where a new browser session was made from (see Sessions.noteSessionDevice), best effort: a
   * store that fails here fails no sign-in; the session's device then shows as unknown.
   */
  private async noteDevice(sid: string, user: string, client: SigningInClient, ttlSeconds: number): Promise<void> {
    const device: SessionDevice = { address: client.address, userAgent: (client.userAgent ?? '').slice(0, MAX_NOTED_USER_AGENT) };
    try {
      await this.store.noteSessionDevice(sid, user, device, ttlSeconds);
    } catch (err) {
      this.log.debug('the device of a new session was not noted; it shows as unknown', { user, sid, error: String(err) });
    }
  }

  /**
   * Ends sessions of `user` (on every instance): `which` is one of its session ids, or 'others' for all
   * but `current`. A session id that is not the user's ends nothing. Answers how many ended.
   */
  async endSessionsOf(user: string, which: string, current: string): Promise<number> {
    const own = (await this.store.listSessions(user)).map((s) => s.sid);
    const ending = which === 'others' ? own.filter((sid) => sid !== current) : own.filter((sid) => sid === which);
    for (const sid of ending) await this.store.revoke(sid);
    if (ending.length > 0) this.log.info('sessions ended by their user', { user, sessions: ending.length });
    return ending.length;
  }

  /**
   * A sign-in's start: the provider's authorization URL (code flow, PKCE S256, state, nonce) and the
   * sealed state to keep in the state cookie. `origin` is the gateway's public origin; `returnTo` a
   * same-origin path (safeReturnPath).
   */
  async begin(origin: string, returnTo: string, providerName?: string): Promise<{ location: string; cookieName: string; sealed: string }> {
    const provider = this.provider(providerName);
    const configuration = await provider.discovery();
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const redirectUri = `${origin}${this.config.callbackPath}`;
    const location = oidc.buildAuthorizationUrl(configuration, {
      redirect_uri: redirectUri,
      scope: provider.config.scopes.join(' '),
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    }).href;
    const sealed: LoginState = { v: verifier, s: state, n: nonce, r: returnTo, c: redirectUri, e: this.clock.now() + LOGIN_STATE_TTL_S * 1000, p: provider.name };
    return { location, cookieName: this.stateCookieName(state), sealed: this.sealer.seal(STATE_PURPOSE, sealed) };
  }

  /**
   * The callback: the state cookie must match (else `invalid_request`), the provider's answer is checked and the code
   * exchanged by openid-client (state, PKCE, the ID token's signature, issuer, audience, nonce, expiry).
   * Answers the sealed session handle for the cookie and where to send the browser.
   */
  async complete(query: string, stateCookie: string | undefined, client: SigningInClient): Promise<{ cookie: string; returnTo: string }> {
    const opened = stateCookie === undefined ? undefined : this.sealer.open(STATE_PURPOSE, stateCookie) as LoginState | undefined;
    if (!opened || typeof opened.s !== 'string' || typeof opened.e !== 'number' || opened.e <= this.clock.now()) {
      throw new DomainError('invalid_request', 'no sign-in is in progress in this browser (its state cookie is missing or expired): open the page again');
    }
    // The provider is the one this sign-in began at (its state names it; a state of the last release, none:
    // its one provider). A response that does not fit it is refused before any token request.
    const provider = this.provider(typeof opened.p === 'string' ? opened.p : this.providers[0]?.name);
    const configuration = await provider.discovery();
    const current = new URL(`${opened.c}?${query}`);
    const iss = current.searchParams.get('iss');
    if (iss !== null && iss !== provider.issuer) {
      // RFC 9207: the authorization response names its issuer; another one than the sign-in's is a mix-up.
      this.log.warn('sign-in refused: the authorization response is from another issuer than the sign-in began at', { issuer: provider.name, iss });
      throw new DomainError('invalid_request', `the authorization response is from ${iss}, not from ${provider.issuer} where this sign-in began (a mix-up): open the page again`);
    }
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
    try {
      tokens = await oidc.authorizationCodeGrant(configuration, current, {
        pkceCodeVerifier: opened.v,
        expectedState: opened.s,
        expectedNonce: opened.n,
        idTokenExpected: true,
      });
    } catch (err) {
      throw this.grantFailure(err, provider);
    }
    const idClaims = tokens.claims()!;
    const { userClaim, groupsClaim } = provider.keys.config;
    let claims: Record<string, unknown> = idClaims;
    const missing = claimAt(claims, userClaim) === undefined || (groupsClaim !== undefined && claimAt(claims, groupsClaim) === undefined);
    if (missing && tokens.access_token && configuration.serverMetadata().userinfo_endpoint) {
      // Providers that keep profile claims out of the ID token (node-oidc-provider, Keycloak's
      // options) answer them at userinfo, for this same subject.
      try {
        claims = { ...(await oidc.fetchUserInfo(configuration, tokens.access_token, idClaims.sub)), ...idClaims };
      } catch (err) {
        this.log.warn('userinfo not read at sign-in; the ID token\'s claims are used alone', { issuer: provider.name, error: fetchFailure(err) });
      }
    }
    const user = claimAt(claims, userClaim);
    if (typeof user !== 'string' || user === '') {
      throw new DomainError('forbidden', `the provider did not tell the user's ${userClaim}: ask for a scope that includes it (login.scopes)`);
    }
    // The bearer path's rule (src/auth/oidc.ts): a name with a control character or a lone surrogate,
    // or over 256 characters, names no one a header, a log or an allow rule can carry.
    if (!isUsableName(user)) {
      this.log.info('sign-in refused: the provider\'s user name is not usable', { issuer: provider.name, claim: userClaim, sub: idClaims.sub, length: user.length });
      throw new DomainError('forbidden', `the provider's ${userClaim} is not a usable user name (at most 256 characters, no control character or lone surrogate): the user cannot sign in here`);
    }
    const groups = groupsOf(claims, groupsClaim);
    const ttl = this.config.sessionTtlSeconds;
    const sid = await this.store.createSession({ sub: user, uv: LOGIN_SESSION_UV }, ttl);
    try {
      const tags = [subjectTag(provider.issuer, idClaims.sub)];
      if (typeof idClaims.sid === 'string' && idClaims.sid !== '') tags.push(sessionTag(provider.issuer, idClaims.sid));
      await this.store.tagSession(sid, tags, ttl);
    } catch (err) {
      // Unfiled, a back-channel logout could not reach it: it is not handed out.
      await this.store.revoke(sid).catch(() => {});
      throw err;
    }
    await this.noteDevice(sid, user, client, ttl);
    const session: BrowserSession = { sid, user, groups, exp: Math.floor(this.clock.now() / 1000) + ttl, idToken: tokens.id_token, p: provider.name };
    let cookie = this.sealer.seal(SESSION_PURPOSE, session);
    if (cookie.length > MAX_COOKIE_VALUE) cookie = this.sealer.seal(SESSION_PURPOSE, { ...session, idToken: undefined });
    if (cookie.length > MAX_COOKIE_VALUE) {
      await this.store.revoke(sid).catch(() => {});
      throw new DomainError('provider_answer_unusable', 'the provider\'s groups do not fit in a session cookie: narrow the groups claim');
    }
    this.log.info('browser signed in', { user, issuer: provider.name, sid });
    return { cookie, returnTo: typeof opened.r === 'string' ? safeReturnPath(opened.r) : '/' };
  }

  /**
   * Sign-out: the cookie's session (when it opens) is revoked everywhere. A provider's session then
   * goes to the provider's end_session_endpoint with id_token_hint (when the cookie kept it),
   * post_logout_redirect_uri (login.postLogoutRedirectUri, on `origin` when it is a path) and a
   * state; a local session, or a provider without that endpoint, goes to postLogoutRedirectUri.
   */
  async end(cookie: string | undefined, origin: string): Promise<string> {
    const session = cookie === undefined ? undefined : openSession(this.sealer, cookie);
    if (session) {
      await this.store.revoke(session.sid);
      this.log.info('browser signed out', { user: session.user, sid: session.sid });
    }
    const configured = this.config.postLogoutRedirectUri;
    const landing = configured.startsWith('/') ? `${origin}${configured}` : configured;
    if (this.providers.length === 0 || session?.local === true) return landing;
    // The provider the session signed in at (a cookie of the last release names none: its one provider).
    const provider = this.providers.find((p) => p.name === (session?.p ?? this.providers[0]!.name));
    if (!provider) return landing;
    let configuration: oidc.Configuration;
    try {
      configuration = await provider.discovery();
    } catch {
      return landing;
    }
    if (!configuration.serverMetadata().end_session_endpoint) return landing;
    const parameters: Record<string, string> = { client_id: provider.config.clientId, post_logout_redirect_uri: landing, state: oidc.randomState() };
    if (session?.idToken) parameters.id_token_hint = session.idToken;
    return oidc.buildEndSessionUrl(configuration, parameters).href;
  }

  /**
   * Back-channel logout: a valid logout token revokes, on every instance, the gateway sessions of the
   * provider session it names (`sid`), else of its user (`sub`), and answers how many were live.
   * Its `jti` is remembered in the store for as long as its `iat` is acceptable, so the same token a
   * second time (on any instance) is refused: a captured token cannot end the user's later sessions.
   * Invalid or replayed: `invalid_request` with the spec's `error`; no key of the issuer known:
   * `identity_provider_unavailable`.
   */
  async backchannel(logoutToken: string | undefined): Promise<number> {
    if (logoutToken === undefined || logoutToken === '') throw invalidLogout('logout_token is required');
    const provider = this.logoutTokenProvider(logoutToken);
    const maxAge = this.config.logoutTokenMaxAgeSeconds;
    let subject;
    try {
      subject = await verifyLogoutToken(logoutToken, provider.keys, provider.config.clientId, maxAge);
    } catch (err) {
      if (err instanceof InvalidLogoutToken) throw invalidLogout(err.message);
      if (err instanceof KeysUnavailable) throw unavailable(provider.name, err.message);
      throw err;
    }
    // Remembered past the last moment its iat passes on any instance (the skew either way).
    const remember = maxAge + 2 * provider.keys.config.clockSkewSeconds;
    if (!(await this.store.firstSighting(`oidc logout ${provider.issuer} ${subject.jti}`, remember))) {
      this.log.warn('back-channel logout token replayed; refused', { issuer: provider.name, jti: subject.jti });
      throw invalidLogout('the logout_token was used before (its jti is known)');
    }
    const tag = subject.sid !== undefined ? sessionTag(provider.issuer, subject.sid) : subjectTag(provider.issuer, subject.sub!);
    const ended = await this.store.revokeTagged(tag);
    this.log.info('back-channel logout', { issuer: provider.name, by: subject.sid !== undefined ? 'sid' : 'sub', sessions: ended });
    return ended;
  }

  /**
   * The provider a logout token is for, by its `iss` (read before its signature is checked, only to
   * pick the keys that check it); with one provider, that one (its verification says what is wrong).
   */
  private logoutTokenProvider(token: string): LoginProvider {
    if (this.providers.length === 0) throw invalidLogout('no OpenID provider signs in here');
    if (this.providers.length === 1) return this.providers[0]!;
    let iss: unknown;
    try {
      iss = (JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { iss?: unknown }).iss;
    } catch {
      throw invalidLogout('the logout_token is not a JWT');
    }
    const provider = this.providers.find((p) => p.issuer === iss);
    if (!provider) throw invalidLogout('the logout_token\'s iss is none of the providers of sign-in');
    return provider;
  }

  private grantFailure(err: unknown, provider: LoginProvider): unknown {
    if (err instanceof DomainError) return err;
    if (err instanceof oidc.AuthorizationResponseError) {
      return new DomainError('forbidden', `the provider did not sign the user in: ${err.error}${err.error_description ? ` (${err.error_description})` : ''}`);
    }
    if (err instanceof oidc.ResponseBodyError || err instanceof oidc.ClientError) {
      this.log.info('sign-in refused at the callback', { issuer: provider.name, error: (err as Error).message });
      return new DomainError('invalid_request', `the sign-in could not be completed: ${(err as Error).message}`);
    }
    this.log.warn('sign-in callback could not reach the provider', { issuer: provider.name, error: fetchFailure(err) });
    return unavailable(provider.name, fetchFailure(err));
  }
}

/** One provider of sign-in: its settings (login.providers), its issuer's keys and its discovery. */
export class LoginProvider {
  private readonly ca: string[] | undefined;
  private discovered: Promise<oidc.Configuration> | undefined;
  private failedAt = Number.NEGATIVE_INFINITY;

  constructor(
    readonly config: LoginProviderConfig,
    readonly keys: IssuerKeys,
    readonly callbackPath: string,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.ca = providerCa(keys.config.caFile, `the caFile of ${keys.name}`);
  }

  /** Its identity.issuers name (in a sign-in's state, a session cookie, logs, the page's button). */
  get name(): string {
    return this.keys.name;
  }

  /** Its issuer identifier (a URL). */
  get issuer(): string {
    return this.keys.issuer;
  }

  /** The provider's discovery (single-flight; a failure is retried by a sign-in after DISCOVERY_RETRY_MS). */
  discovery(): Promise<oidc.Configuration> {
    if (this.discovered) return this.discovered;
    if (this.clock.now() - this.failedAt < DISCOVERY_RETRY_MS) return Promise.reject(unavailable(this.name, 'discovery failed moments ago'));
    const run = discoverProvider(this.config, this.issuer, this.ca).then((configuration) => configuration, (err: unknown) => {
      this.discovered = undefined;
      this.failedAt = this.clock.now();
      this.log.warn('provider discovery failed; sign-ins answer 503 until it succeeds', { issuer: this.name, error: fetchFailure(err) });
      throw unavailable(this.name, fetchFailure(err));
    });
    this.discovered = run;
    return run;
  }
}

/** openid-client's discovery of the provider, its requests trusting `ca` (the issuer's caFile). */
async function discoverProvider(config: LoginProviderConfig, issuer: string, ca: string[] | undefined): Promise<oidc.Configuration> {
  const issuerUrl = new URL(issuer);
  const auth = config.clientSecret === undefined ? oidc.None() : oidc.ClientSecretBasic(config.clientSecret);
  const configuration = await oidc.discovery(issuerUrl, config.clientId, undefined, auth, {
    [oidc.customFetch]: providerFetch(ca),
    // http:// is accepted for a loopback issuer only (src/config/issuer-settings.ts).
    execute: issuerUrl.protocol === 'http:' && isLoopback(issuerUrl.hostname) ? [oidc.allowInsecureRequests] : [],
  });
  configuration.timeout = 5;
  return configuration;
}

/**
 * `config check --connect`: the provider's discovery as sign-in uses it, and what of it sign-in needs
 * (the authorization and token endpoints, PKCE S256, end-session and back-channel logout support).
 */
export async function describeLoginProvider(config: LoginProviderConfig, issuer: string, caFile: string | undefined): Promise<string> {
  const m = (await discoverProvider(config, issuer, providerCa(caFile, 'login.issuer caFile'))).serverMetadata();
  if (!m.authorization_endpoint || !m.token_endpoint) throw new Error('the discovery document names no authorization_endpoint or token_endpoint');
  const pkce = m.code_challenge_methods_supported;
  if (Array.isArray(pkce) && !pkce.includes('S256')) throw new Error('the provider does not support PKCE S256');
  return `authorization ${m.authorization_endpoint}; end-session ${m.end_session_endpoint ?? 'none (sign-out ends the gateway session only)'}; `
    + `back-channel logout ${m.backchannel_logout_supported === true ? `supported${m.backchannel_logout_session_supported === true ? ' with sid' : ''}` : 'not announced'}`;
}

/** The store tag of a provider session (its `sid` claim). */
function sessionTag(issuer: string, sid: string): string {
  return `oidc sid ${issuer} ${sid}`;
}

/** The store tag of a provider user (its `sub` claim). */
function subjectTag(issuer: string, sub: string): string {
  return `oidc sub ${issuer} ${sub}`;
}

/**
 * Where a browser may be sent back to after signing in: a path of this origin only. Anything else
 * (an absolute URL, `//host`, `/\host`, a backslash or control character anywhere, over 2 KiB) is `/`:
 * no open redirect. The path is judged as written and again once normalized (`/.//evil.example` and
 * `/..//evil.example` normalize to `//evil.example`, a host), so what it answers is one it answers
 * itself unchanged: it never starts with `//` or `/\`, and running it twice changes nothing.
 */
export function safeReturnPath(raw: string): string {
  if (!plainPath(raw)) return '/';
  const base = 'https://gateway.invalid';
  let u: URL;
  try {
    u = new URL(raw, base);
  } catch {
    return '/';
  }
  if (u.origin !== base) return '/';
  const normalized = `${u.pathname}${u.search}`;
  // Percent-encoding may lengthen it past the bound; dot segments may leave `//` in front.
  return plainPath(normalized) ? normalized : '/';
}

/** A path a browser reads as this origin's: `/`, not `//` or `/\`, no backslash or control character, at most 2 KiB. */
function plainPath(path: string): boolean {
  if (path.length === 0 || path.length > MAX_RETURN_PATH || path[0] !== '/' || path[1] === '/' || path[1] === '\\') return false;
  // eslint-disable-next-line no-control-regex
  return !/[\\\x00-\x20\x7f]/.test(path);
}

function invalidLogout(reason: string): DomainError {
  // The spec's error body (section 2.8) inside the problem body.
  return new DomainError('invalid_request', reason, { details: { error: 'invalid_request', error_description: reason } });
}

function unavailable(name: string, reason: string): DomainError {
  return new DomainError('identity_provider_unavailable', `the OpenID provider ${name} cannot be reached: ${reason}`, { retryAfterSeconds: 10 });
}
