import { DomainError } from '../core/domain-error.js';
import type { Principal } from '../core/principal.js';
import type { Sessions } from '../stores/sessions/session-store.js';
import type { Authenticator } from './authenticator.js';
import { cookieValue, type Sealer } from './seal.js';

/** What a browser session's cookie holds, sealed (src/auth/seal.ts): nothing a browser can read or change. */
export interface BrowserSession {
  /** The gateway session in the store. */
  sid: string;
  user: string;
  /** From the provider's groups claim at sign-in. */
  groups: string[];
  /** When the session ends (seconds since the epoch). */
  exp: number;
  /** The provider's ID token, for id_token_hint at sign-out (left out when it would not fit). */
  idToken?: string;
  /**
   * Signed in with a password of the gateway's own users (login.local), not at a provider: its groups
   * are the user's at each request (users file, store, directory), as for Basic.
   */
  local?: true;
  /** The provider signed in at (its identity.issuers name); absent in a cookie of the last release (its one provider). */
  p?: string;
}

export const SESSION_PURPOSE = 'gateway session v1';
/** Opened cookies remembered (a steady browser costs a Map lookup, not a decryption). */
const MAX_OPENED = 4096;

/** The session a sealed cookie value holds, or undefined (forged, changed, garbage). */
export function openSession(sealer: Sealer, value: string): BrowserSession | undefined {
  const v = sealer.open(SESSION_PURPOSE, value) as Partial<BrowserSession> | undefined;
  if (!v || typeof v.sid !== 'string' || typeof v.user !== 'string' || typeof v.exp !== 'number' || !Array.isArray(v.groups)) return undefined;
  const session: BrowserSession = { sid: v.sid, user: v.user, groups: v.groups.filter((g): g is string => typeof g === 'string'), exp: v.exp, idToken: typeof v.idToken === 'string' ? v.idToken : undefined };
  if (v.local === true) session.local = true;
  if (typeof v.p === 'string') session.p = v.p;
  return session;
}

/**
 * The browser sessions of sign-in (`login`): the session cookie's sealed handle opens to a gateway
 * session, which must be live in the store, as for the gateway's own bearer tokens: from the liveness
 * cache without waiting when it knows, else one round trip, so a revocation (sign-out, `sessions
 * revoke`, a back-channel logout) ends it on every instance at once. Its principal is ambient (the
 * browser sends the cookie by itself: the origin step refuses cross-site unsafe methods and
 * handshakes), carries the session (its revocation ends its tunnels), its expiry and the groups of the
 * provider's groups claim at sign-in. Asked last: a request's Authorization header decides first.
 */
export function cookieSessionAuthenticator(cookieName: string, sealer: Sealer, store: Pick<Sessions, 'isLive' | 'isLiveNow'>, now: () => number): Authenticator<string> {
  const opened = new Map<string, BrowserSession>();
  const open = (value: string) => {
    let session = opened.get(value);
    if (session === undefined) {
      session = openSession(sealer, value);
      if (session === undefined) return undefined;
      if (opened.size >= MAX_OPENED) opened.clear();
      opened.set(value, session);
    }
    return session;
  };
  return {
    via: 'oidc-session',
    scheme: undefined,
    challenge: undefined,
    securityScheme: { name: 'session', scheme: { type: 'apiKey', in: 'cookie', name: cookieName, description: 'The session cookie of browser sign-in (login).' } },
    parse(req) {
      const header = req.headers.cookie;
      if (header === undefined) return undefined;
      const value = cookieValue(header, cookieName);
      return value === undefined || value === '' ? undefined : value;
    },
    verify(value) {
      const session = open(value);
      if (!session) throw new DomainError('credentials_not_accepted', 'the session cookie is not one this gateway made: sign in again');
      if (session.exp <= now() / 1000) throw new DomainError('session_expired', 'the browser session has expired: sign in again');
      const live = store.isLiveNow(session.sid);
      if (live === true) return principal(session, value);
      if (live === false) throw ended();
      return store.isLive(session.sid).then((known) => {
        if (!known) throw ended();
        return principal(session, value);
      });
    },
    async recheck(owner) {
      const session = open(owner.proof);
      if (!session) return 'invalid_credentials';
      try {
        return (await store.isLive(session.sid)) ? undefined : 'invalid_token';
      } catch {
        // The store being down is no reason (open tunnels outlive a Redis blip).
        return undefined;
      }
    },
  };
}

function principal(session: BrowserSession, value: string): Principal {
  // A local session's groups are looked up like Basic's (ownGroups false); a provider's came with it.
  if (session.local) return { user: session.user, via: 'oidc-session', groups: undefined, ownGroups: false, sid: session.sid, expiresAt: session.exp, ambient: true, proof: value, credential: undefined };
  return { user: session.user, via: 'oidc-session', groups: session.groups, ownGroups: true, sid: session.sid, expiresAt: session.exp, ambient: true, proof: value, credential: undefined };
}

function ended(): DomainError {
  return new DomainError('session_ended', 'the browser session has ended (signed out or revoked): sign in again');
}
