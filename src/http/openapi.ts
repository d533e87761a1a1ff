import { authorizationPaths } from '../authz/openapi-paths.js';
import { loginPaths } from './openapi-login.js';
import type { Config, PagingRules, RouteConfig } from '../config/types.js';
import type { ProblemCode } from './problem.js';
import type { GatewayContext } from './state.js';
import type { SecurityScheme } from '../auth/authenticator.js';

type Json = Record<string, unknown>;

/** Every problem code, checked against ProblemCode by the compiler: a new code cannot be left out. */
const PROBLEM_CODES = Object.keys({
  invalid_request: 1, request_timeout: 1, expectation_failed: 1, malformed_json: 1, unsupported_media_type: 1, payload_too_large: 1, method_not_allowed: 1,
  not_found: 1, invalid_path: 1, uri_too_long: 1, headers_too_large: 1, missing_credentials: 1,
  invalid_credentials: 1, invalid_token: 1, token_expired: 1, invalid_refresh_token: 1, too_many_attempts: 1, forbidden: 1,
  rate_limited: 1, invalid_page_size: 1, invalid_page: 1, invalid_sort: 1, store_unavailable: 1, directory_unavailable: 1, bad_gateway: 1,
  gateway_timeout: 1, service_unavailable: 1, internal_error: 1, websocket_not_allowed: 1, cors_not_allowed: 1,
  identity_provider_unavailable: 1,
} satisfies Record<ProblemCode, 1>);

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: ref('Problem') } } });
const json = (description: string, schema: Json) => ({ description, content: { 'application/json': { schema } } });
const nonEmpty = { type: 'string', minLength: 1 };

/**
 * The OpenAPI 3.1 document of the gateway's own API: the three token endpoints, the problem body, and
 * for each configured route with paging its `size`/`page`/`sort` parameters (from that route's rules)
 * and the page envelope. Built from the configuration, so it names exactly the routes being served.
 */
function openApiDocument(config: Config, schemes: readonly SecurityScheme[] = DEFAULT_SCHEMES): Json {
  const paths: Json = {
    '/v1/tokens/create': tokenOperation('create', 'Signs in with an htpasswd user and password: a new session and its token pair.', 'CreateRequest', true),
    '/v1/tokens/refresh': tokenOperation('refresh', 'Rotates a refresh token: a new pair; the presented refresh token stops working (reuse revokes the session).', 'RefreshRequest', true),
    '/v1/tokens/revoke': tokenOperation('revoke', 'Ends the session of an access or refresh token (RFC 7009: unknown tokens also get 200).', 'RevokeRequest', false),
    '/healthz': { get: { operationId: 'healthz', summary: 'The process answers.', security: [], responses: { 200: json('alive', ref('Health')) } } },
    '/readyz': {
      get: {
        operationId: 'readyz', summary: 'The token store answers.', security: [],
        responses: { 200: json('ready', ref('Health')), 503: problem('the token store is not reachable') },
      },
    },
    '/openapi.json': { get: { operationId: 'openapi', summary: 'This document.', security: [], responses: { 200: json('the OpenAPI document', { type: 'object' }) } } },
  };
  for (const route of config.routes) {
    // A forward-auth-only route (no upstream) is served by another proxy, its paging unchecked here.
    if (route.paging && route.upstream !== undefined) paths[route.path] = listOperation(route, route.paging);
  }
  Object.assign(paths, authorizationPaths(config));
  Object.assign(paths, loginPaths(config));
  return {
    openapi: '3.1.0',
    info: {
      title: 'auth-gateway',
      version: '1',
      description: 'Token endpoints of the gateway and the paged list routes it forwards. Every error the gateway writes is RFC 9457 problem JSON with a machine-readable code.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    // Any one of the identity sources that are on, each as its authenticator declares it.
    security: schemes.map((s) => ({ [s.name]: [] })),
    paths,
    components: {
      securitySchemes: Object.fromEntries(schemes.map((s) => [s.name, s.scheme])),
      schemas: SCHEMAS,
    },
  };
}

/** The schemes of the two sources that are always on, for a document made without the authenticators. */
const DEFAULT_SCHEMES: readonly SecurityScheme[] = [
  { name: 'basic', scheme: { type: 'http', scheme: 'basic' } },
  { name: 'bearer', scheme: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
];

/**
 * GET /openapi.json, without credentials (it describes the API, nothing about its users); built once per
 * configuration, with the security schemes of the authenticators that are on.
 */
export function openApi(config: Config, schemes: readonly SecurityScheme[]): (ctx: GatewayContext) => void {
  const body = JSON.stringify(openApiDocument(config, schemes));
  return function serveOpenApi(ctx) {
    ctx.type = 'application/json';
    ctx.body = body;
  };
}

function tokenOperation(name: string, summary: string, request: string, returnsPair: boolean): Json {
  const common = {
    400: problem('malformed_json, invalid_request (a field missing, not a string or empty; a wrong revoke type)'),
    405: problem('method_not_allowed: only POST'),
    413: problem('payload_too_large: the body is over 16 KiB'),
    415: problem('unsupported_media_type: the body is not application/json, or has a Content-Encoding other than identity'),
    503: problem('store_unavailable, directory_unavailable (users.ldap) or service_unavailable: retry after Retry-After'),
  };
  const ok = returnsPair ? json('a new token pair (Cache-Control: no-store)', ref('TokenPair')) : { description: 'revoked, or nothing to revoke; empty body' };
  const responses: Json = { 200: ok, ...common };
  if (name === 'create') {
    responses[401] = problem('invalid_credentials: unknown user or wrong password');
    responses[429] = problem('too_many_attempts: locked out; retry after Retry-After');
  }
  if (name === 'refresh') responses[401] = problem('invalid_refresh_token: invalid, expired, revoked or already used');
  return {
    post: {
      operationId: name, summary, security: [],
      requestBody: { required: true, content: { 'application/json': { schema: ref(request) } } },
      responses,
    },
  };
}

function listOperation(route: RouteConfig, paging: PagingRules): Json {
  const parameters: Json[] = [
    {
      name: 'size', in: 'query', required: false, description: `Page size, one of ${paging.sizes.join(', ')}.`,
      schema: { type: 'integer', enum: paging.sizes, default: paging.defaultSize },
    },
    {
      name: 'page', in: 'query', required: false, description: '0-based page number.',
      schema: { type: 'integer', minimum: 0, maximum: 999_999_999, default: 0 },
    },
  ];
  if (paging.sortable.length > 0) {
    parameters.push({
      name: 'sort', in: 'query', required: false, style: 'form', explode: true,
      description: `\`property[,asc|desc]\` (direction in any case, default asc), repeatable, each property once; properties: ${paging.sortable.join(', ')}.`,
      schema: { type: 'array', items: { type: 'string', pattern: sortPattern(paging.sortable) } },
    });
  }
  return {
    get: {
      operationId: `list${route.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase())}`,
      summary: `A page of ${route.path} from the ${route.upstream} upstream, paging rewritten to one canonical form.`,
      parameters,
      responses: {
        200: json('a page (the upstream\'s answer, passed through)', ref('Page')),
        400: problem('invalid_page_size, invalid_page or invalid_sort'),
        401: problem('missing_credentials, invalid_credentials, invalid_token or token_expired'),
        403: problem('forbidden: the route\'s allow rules refuse this user or method'),
        429: problem('too_many_attempts or rate_limited: retry after Retry-After'),
        502: problem('bad_gateway: the upstream refused or reset the connection'),
        503: problem('store_unavailable, service_unavailable, identity_provider_unavailable (no signing key of the token\'s OpenID provider is known) or directory_unavailable (users.ldap)'),
        504: problem('gateway_timeout: the upstream did not answer in time'),
      },
    },
  };
}

/** `prop` or `prop,asc|desc` with the direction in any case (the gateway lowercases it). */
function sortPattern(sortable: string[]): string {
  const props = sortable.map((p) => p.replace(/[.]/g, '\\.')).join('|');
  return `^(${props})(,([Aa][Ss][Cc]|[Dd][Ee][Ss][Cc]))?$`;
}

const SCHEMAS: Json = {
  Problem: {
    type: 'object',
    description: 'RFC 9457 problem details; some codes add members (e.g. `allowed`).',
    required: ['type', 'title', 'status', 'detail', 'code'],
    properties: {
      type: { type: 'string', pattern: '^urn:auth-gateway:problem:[a-z_]+$' },
      title: nonEmpty,
      status: { type: 'integer', minimum: 400, maximum: 599 },
      detail: { type: 'string' },
      code: { type: 'string', enum: PROBLEM_CODES },
      allowed: { type: 'array', items: { type: ['integer', 'string'] } },
    },
  },
  TokenPair: {
    type: 'object',
    additionalProperties: false,
    required: ['accessToken', 'refreshToken', 'expiresInSeconds'],
    properties: {
      accessToken: { type: 'string', pattern: '^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$', description: 'a JWT' },
      refreshToken: { type: 'string', pattern: '^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$', description: 'opaque: `<session id>.<secret>`' },
      expiresInSeconds: { type: 'integer', minimum: 1, description: 'lifetime of the access token' },
    },
  },
  CreateRequest: {
    type: 'object', required: ['appKey', 'appSecret'],
    properties: { appKey: { ...nonEmpty, description: 'user name' }, appSecret: { ...nonEmpty, description: 'password' } },
  },
  RefreshRequest: { type: 'object', required: ['refreshToken'], properties: { refreshToken: nonEmpty } },
  RevokeRequest: {
    type: 'object', required: ['token', 'type'],
    properties: { token: nonEmpty, type: { type: 'string', enum: ['ACCESS_TOKEN', 'REFRESH_TOKEN'], description: 'a hint: the other kind is tried too' } },
  },
  Page: {
    type: 'object',
    description: 'The page envelope of list routes.',
    required: ['content', 'pageable', 'totalPages', 'totalElements', 'numberOfElements', 'first', 'last'],
    properties: {
      content: { type: 'array', items: { type: 'object' } },
      pageable: {
        type: 'object', required: ['pageNumber', 'pageSize', 'offset'],
        properties: {
          pageNumber: { type: 'integer', minimum: 0 },
          pageSize: { type: 'integer', minimum: 1 },
          offset: { type: 'integer', minimum: 0 },
        },
      },
      totalPages: { type: 'integer', minimum: 0 },
      totalElements: { type: 'integer', minimum: 0 },
      numberOfElements: { type: 'integer', minimum: 0 },
      first: { type: 'boolean' },
      last: { type: 'boolean' },
    },
  },
  Health: { type: 'object', required: ['status'], properties: { status: { type: 'string', enum: ['ok', 'ready'] }, refused: { type: 'string', description: 'ready, but these writes are refused, and why (store.durability strict without its replicas)' } } },
};
