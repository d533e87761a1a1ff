import type { Principal } from '../auth/principal.js';
import type { AssertionConfig } from '../config/types.js';
import { headerSafe } from '../proxy/headers.js';
import type { Route } from '../proxy/route-table.js';
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
 * Who the request is, as headers: X-Authenticated-User, -Via, -Groups (comma-separated, empty when
 * none) and, when configured, the signed assertion for the route's audience. The same set goes to the
 * upstream (upstream headers step) and into a forward-auth answer.
 */
export function identityHeaders(principal: Principal, route: Route, signed: Assertions | undefined): Record<string, string> {
  const groups = principal.groups ?? [];
  const headers: Record<string, string> = {
    'x-authenticated-user': headerSafe(principal.user),
    'x-authenticated-via': principal.via,
    'x-authenticated-groups': groups.map(headerSafe).join(','),
  };
  if (signed) headers[signed.header] = signed.signer.assertion({ user: principal.user, via: principal.via, groups, audience: route.audience });
  return headers;
}
