import type { Config } from '../config/types.js';
import { JWKS_MAX_AGE_SECONDS, JWKS_PATH } from '../identity/jwks.js';

type Json = Record<string, unknown>;

const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } });
const header = (description: string) => ({ description, schema: { type: 'string' } });

/** The OpenAPI paths of the forward-auth endpoint and the JWK Set, when configured. */
export function authorizationPaths(config: Config): Json {
  const paths: Json = {};
  const assertion = config.identity.assertion;
  if (config.forwardAuth) {
    const parameters = [
      ['X-Forwarded-Method', 'The original method (Traefik, Caddy). Or X-Original-Method (nginx). Required.'],
      ['X-Forwarded-Uri', 'The original path and query (Traefik, Caddy). Or X-Original-URI (nginx). Required; when both pairs are sent they must agree.'],
      ['X-Forwarded-Host', 'The host the client addressed.'],
      ['X-Forwarded-Proto', 'http or https.'],
    ].map(([name, description]) => ({ name, in: 'header', required: false, description, schema: { type: 'string' } }));
    const ok: Json = {
      'X-Authenticated-User': header('The user.'),
      'X-Authenticated-Via': header('basic or bearer.'),
      'X-Authenticated-Groups': header('The user\'s groups, comma-separated (empty when none).'),
    };
    if (assertion) ok[assertion.header] = header(`A signed identity assertion (JWT, ${assertion.alg}); keys at ${JWKS_PATH}.`);
    const operation = {
      operationId: 'forwardAuth',
      summary: 'Forward-auth (nginx auth_request, Caddy forward_auth, Traefik ForwardAuth): is the described request allowed, and who is it? Any method.',
      description: 'Authentication (this request\'s Authorization), the route of the described path, its allow rules and rate limit decide, as for a request sent to the gateway itself. Paging is not checked.',
      parameters,
      responses: {
        200: { description: 'allowed; empty body; the identity in headers (Cache-Control: no-store)', headers: ok },
        400: problem('invalid_request or invalid_path: the described request is missing, ambiguous or malformed'),
        401: { ...problem('missing_credentials, invalid_credentials, invalid_token or token_expired; with WWW-Authenticate. A browser navigation (Accept: text/html) to a route with `login: true` also gets `Location`: the gateway\'s sign-in start, for the proxy in front to redirect to'), headers: { Location: header('Only for a browser navigation on a login route: where to sign in.') } },
        403: problem('forbidden: the route\'s allow rules refuse this user or method, or this caller is not in forwardAuth.trustedProxies; cors_not_allowed: a cross-site unsafe method with Basic, a client certificate or the session cookie (which also needs an Origin or Sec-Fetch-Site: same-origin)'),
        404: problem('not_found: no route serves the described path'),
        429: problem('too_many_attempts or rate_limited: retry after Retry-After'),
        503: problem('store_unavailable, directory_unavailable (users.ldap) or service_unavailable'),
      },
    };
    paths[config.forwardAuth.path] = { get: operation, post: { ...operation, operationId: 'forwardAuthPost' } };
  }
  if (assertion) {
    paths[JWKS_PATH] = {
      get: {
        operationId: 'jwks',
        summary: 'The public keys of the identity assertions, as a JWK Set (RFC 7517). No credentials.',
        security: [],
        responses: {
          200: {
            description: `the key set (Cache-Control: public, max-age=${JWKS_MAX_AGE_SECONDS}; ETag)`,
            content: { 'application/jwk-set+json': { schema: { type: 'object', required: ['keys'], properties: { keys: { type: 'array', items: { type: 'object', required: ['kty', 'kid', 'alg', 'use'] } } } } } },
          },
          304: { description: 'not modified (If-None-Match)' },
        },
      },
    };
  }
  return paths;
}
