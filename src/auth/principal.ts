/**
 * Who a request is, set once by the authenticate step and read by every later step, the tunnel
 * registry and the access line. Discriminated on `via`: a Bearer principal also carries its session,
 * the token's expiry and the token itself (a tunnel rechecks it; nothing verifies it twice).
 */
export type Principal = BasicPrincipal | BearerPrincipal;

interface PrincipalBase {
  user: string;
  /** Groups the user is in, when something (an htgroup file) says so; absent otherwise. */
  groups?: readonly string[];
}

export interface BasicPrincipal extends PrincipalBase {
  via: 'basic';
}

export interface BearerPrincipal extends PrincipalBase {
  via: 'bearer';
  /** The session the access token belongs to (its revocation ends what the token opened). */
  sid: string;
  /** When the access token expires, in seconds since the epoch. */
  exp: number;
  token: string;
}
