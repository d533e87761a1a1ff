/**
 * The one table of request headers a client may never hand an upstream through the gateway, and why.
 * The gateway's own header policy (upstreamHeaderObject) removes exactly these, and every front-proxy
 * recipe (`auth-gateway recipe`, src/recipes/) clears exactly these: a header added here is removed by
 * the gateway and by every regenerated recipe at once.
 *
 * Names are lower case with `-`. The gateway also removes each name's `_` spellings (`X-Authenticated_User`:
 * CGI, PHP and WSGI upstreams read `_` as `-`); the recipes drop every header with `_` in its name, as
 * nginx does by default. A `family` is a prefix: the gateway removes every name under it, Caddy deletes
 * by wildcard, and proxies that can only name headers (nginx, Traefik) clear its `members`.
 *
 * Not here, because they depend on the configuration: the API key header (`apiKeys.header`) and the
 * gateway's cookies (`login.cookieName`, removed from `Cookie` rather than as a header): see
 * removedHeaderNames in src/recipes/site.ts.
 */
export type RemovedKind =
  /** The identity the gateway itself sets: client copies removed, then the gateway's value set. */
  | 'gateway-identity'
  /** Another proxy's, framework's or platform's identity header: an upstream written for it trusts it. */
  | 'identity'
  /** A header that names another target, method, scheme or client address than the request's own. */
  | 'override'
  /** The client's address, scheme and host as the hop in front saw them: rebuilt, never passed on. */
  | 'forwarding'
  /** A credential the gateway consumes. */
  | 'credential';

export interface RemovedHeader {
  /** Lower case; for a family, the prefix (ending in `-`, or a name its members extend). */
  name: string;
  kind: RemovedKind;
  /** A family: every header whose name starts with `name`. */
  family?: true;
  /** A family's names as the products that set them write them, for proxies that cannot match a prefix. */
  members?: readonly string[];
}

const gatewayIdentity = (...names: string[]): RemovedHeader[] => names.map((name) => ({ name, kind: 'gateway-identity' }));
const identity = (...names: string[]): RemovedHeader[] => names.map((name) => ({ name, kind: 'identity' }));
const override = (...names: string[]): RemovedHeader[] => names.map((name) => ({ name, kind: 'override' }));
const family = (name: string, members: string[]): RemovedHeader => ({ name, kind: 'identity', family: true, members: members.map((m) => `${name}${m}`) });

export const REMOVED_HEADERS: readonly RemovedHeader[] = [
  // The gateway's own identity headers (the assertion's configured name is added by the configuration).
  ...gatewayIdentity('x-authenticated-user', 'x-authenticated-via', 'x-authenticated-groups', 'x-identity-assertion'),
  // What other proxies and frameworks read a user or groups from (Apache/CGI REMOTE_USER, oauth2-proxy,
  // Authelia, Pomerium, Grafana, Kong, Google IAP, Teleport, …).
  ...identity(
    'x-authenticated-email', 'x-authenticated-userid',
    'remote-user', 'remote-groups', 'remote-email', 'remote-name',
    'x-remote-user', 'x-remote-group', 'x-remote-groups', 'x-remote-email',
    'x-forwarded-user', 'x-forwarded-groups', 'x-forwarded-email', 'x-forwarded-preferred-username', 'x-forwarded-access-token',
    'x-auth-user', 'x-auth-groups', 'x-auth-email',
    'x-user', 'x-user-id', 'x-userid', 'x-username', 'x-email', 'x-groups', 'x-webauth-user', 'x-webauth-groups',
    'x-credential-identifier', 'x-anonymous-consumer', 'x-authenticated-scope', 'x-userinfo', 'x-goog-iap-jwt-assertion', 'teleport-jwt-assertion',
  ),
  // Whole families, by prefix.
  family('x-amzn-oidc-', ['identity', 'data', 'accesstoken']),
  family('x-goog-authenticated-user-', ['email', 'id']),
  family('x-consumer-', ['id', 'custom-id', 'username', 'groups']),
  family('x-auth-request-', ['user', 'groups', 'email', 'preferred-username', 'access-token', 'redirect']),
  family('x-pomerium-', ['jwt-assertion', 'claim-email', 'claim-groups', 'claim-user', 'claim-name', 'claim-sub']),
  family('x-ms-client-principal', ['', '-name', '-id', '-idp']),
  family('x-ms-token-', ['aad-id-token', 'aad-access-token', 'aad-refresh-token', 'aad-expires-on']),
  family('cf-access-', ['authenticated-user-email', 'jwt-assertion', 'client-id']),
  family('x-authentik-', ['username', 'groups', 'email', 'name', 'uid', 'jwt', 'entitlements']),
  family('x-vouch-', ['user', 'success', 'token']),
  family('tailscale-user-', ['login', 'name', 'profile-pic']),
  // Another target, method or client than the request's own (a route may let one of these through).
  ...override(
    'x-original-url', 'x-rewrite-url', 'x-original-uri', 'x-forwarded-uri', 'x-forwarded-path', 'x-envoy-original-path',
    'x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-method',
    'x-forwarded-prefix', 'x-forwarded-server', 'x-forwarded-scheme', 'x-forwarded-ssl', 'x-original-host', 'x-host',
    'x-client-ip', 'true-client-ip', 'x-cluster-client-ip', 'client-ip', 'x-remote-ip', 'x-remote-addr', 'x-originating-ip',
    'cf-connecting-ip', 'fastly-client-ip', 'x-original-forwarded-for', 'front-end-https',
  ),
  // Rebuilt by whoever forwards: the gateway, or the recipe's proxy from its own connection.
  ...['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'forwarded', 'x-real-ip'].map((name): RemovedHeader => ({ name, kind: 'forwarding' })),
  // Credentials: consumed by the gateway (a route with forwardAuthorization passes Authorization on).
  { name: 'authorization', kind: 'credential' },
  // The gateway's answers to a forward-auth question name these; only the gateway may set them.
  { name: 'x-gateway-upstream', kind: 'gateway-identity' },
  { name: 'x-gateway-refusal', kind: 'gateway-identity' },
];

/** The names of one kind (families by their prefix). */
export function removedNames(...kinds: RemovedKind[]): string[] {
  return REMOVED_HEADERS.filter((h) => kinds.includes(h.kind)).map((h) => h.name);
}
