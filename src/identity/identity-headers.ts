import type { AssertionConfig } from '../config/types.js';
import type { Principal } from '../core/principal.js';
import { headerSafe } from '../core/headers.js';
import type { AssertionSigner } from './assertion.js';

/** The configured assertion: its header (lower case) and the signer. */
export interface Assertions {
  header: string;
  signer: AssertionSigner;
}

export function assertions(config: AssertionConfig, signer: AssertionSigner): Assertions {
  return { header: config.header.toLowerCase(), signer };
}

/**
 * The signed assertion of who the principal is, for a route's audience; with the x5t#S256 thumbprint of
 * the connection's verified client certificate as its `cnf` when there is one.
 */
export function signedAssertion(principal: Principal, audience: string, signed: Assertions, certificate?: string): string {
  return signed.signer.assertion({ user: principal.user, via: principal.via, groups: principal.groups ?? [], audience, certificate });
}

/**
 * Who the request is, as headers: X-Authenticated-User, -Via, -Groups (comma-separated, empty when
 * none) and, when configured, the signed assertion for the route's audience: a forward-auth answer's
 * headers (the upstream headers step sets the same names on the upstream request).
 */
export function identityHeaders(principal: Principal, audience: string, signed: Assertions | undefined, certificate?: string): Record<string, string> {
  const groups = principal.groups ?? [];
  const headers: Record<string, string> = {
    'x-authenticated-user': headerSafe(principal.user),
    'x-authenticated-via': principal.via,
    'x-authenticated-groups': groups.map(headerSafe).join(','),
  };
  if (signed) headers[signed.header] = signedAssertion(principal, audience, signed, certificate);
  return headers;
}
