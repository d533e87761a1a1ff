/**
 * Who a request is, made by the authenticator that recognised its credentials and read by every later
 * step, the tunnel registry and the access line. One fixed shape whatever the source (every member is
 * always set, so every principal is one hidden class for the steps that read it): nothing outside the
 * authenticators branches on where it came from.
 */
export interface Principal {
  readonly user: string;
  /** Which kind of credential proved it ("basic", "bearer", …): a label for headers, logs and metrics. */
  readonly via: string;
  /** Groups the user is in (set once by the allow step, from the groups its source knows). */
  groups: readonly string[] | undefined;
  /**
   * The source set `groups` itself (a provider token's groups claim, a client certificate's OU values), not
   * the groups file: an open tunnel is judged again by them, not by the file.
   */
  readonly ownGroups: boolean;
  /** The session whose revocation ends what this principal opened (a tunnel); undefined: none. */
  readonly sid: string | undefined;
  /** When the credential expires, in seconds since the epoch (a tunnel ends then); undefined: never. */
  readonly expiresAt: number | undefined;
  /**
   * A browser sends this credential by itself (cached Basic credentials, a cookie): a cross-site page
   * could make it send one, so unsafe methods and WebSocket handshakes with it need a trusted Origin.
   */
  readonly ambient: boolean;
  /** What its authenticator needs to check it again later (an open tunnel); opaque to everyone else. */
  readonly proof: string;
  /** What the credential itself names and limits beyond the route's rules (an API key); undefined: nothing. */
  readonly credential: CredentialFacts | undefined;
}

/** A credential with a name and limits of its own (an API key), read by the allow and rate-limit steps and the access line. */
export interface CredentialFacts {
  /** Its id and name, for access lines; never a secret. */
  readonly id: string;
  readonly name: string;
  /** Paths it may call (each with what is under it, any case, as routes match); empty: any. */
  readonly routes: readonly string[];
  /** Methods it may use (upper case); empty: any. */
  readonly methods: readonly string[];
  /** Its own rate limit, beside the route's; undefined: none. */
  readonly rate: { readonly requests: number; readonly windowSeconds: number } | undefined;
}
