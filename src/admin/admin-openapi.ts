type Json = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: ref('Problem') } } });
const json = (description: string, schema: Json) => ({ description, content: { 'application/json': { schema } } });
const body = (schema: Json) => ({ required: true, content: { 'application/json': { schema } } });
const refusals = {
  400: problem('the request is not what the operation takes (`invalid_request`, `malformed_json`)'),
  401: problem('no or a wrong admin token (`invalid_token`)'),
  404: problem('the admin API, API keys or store users are off, or no such key or user (`not_found`)'),
  503: problem('the store cannot answer now (`store_unavailable`)'),
};
const keyId = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9a-f]{16}$' } };
const userName = { name: 'name', in: 'path', required: true, schema: { type: 'string', minLength: 1 } };
const list = { oneOf: [{ type: 'array', items: { type: 'string' } }, { type: 'string', description: 'comma-separated' }] };

/**
 * The OpenAPI 3.1 document of the admin listener: health, metrics, and (with admin.apiToken) the admin
 * API for API keys and users kept in the store.
 */
export function adminOpenApiDocument(apiOn: boolean): Json {
  const paths: Json = {
    '/healthz': { get: { operationId: 'healthz', summary: 'The process answers.', security: [], responses: { 200: json('alive', { type: 'object' }) } } },
    '/readyz': { get: { operationId: 'readyz', summary: 'The store answers.', security: [], responses: { 200: json('ready', { type: 'object' }), 503: problem('not ready') } } },
    '/metrics': { get: { operationId: 'metrics', summary: 'Prometheus text.', security: [], responses: { 200: { description: 'metrics', content: { 'text/plain': { schema: { type: 'string' } } } } } } },
    '/openapi.json': { get: { operationId: 'adminOpenapi', summary: 'This document.', security: [], responses: { 200: json('the OpenAPI document', { type: 'object' }) } } },
  };
  if (apiOn) {
    Object.assign(paths, {
      '/v1/keys': {
        get: { operationId: 'listKeys', summary: 'Every API key (never a secret or hash).', responses: { 200: json('the keys', { type: 'object', properties: { keys: { type: 'array', items: ref('ApiKey') } } }), ...refusals } },
        post: {
          operationId: 'createKey', summary: 'Creates a key; the answer holds it once (`key`), the store only its SHA-256.',
          requestBody: body(ref('NewApiKey')), responses: { 201: json('created', ref('CreatedApiKey')), ...refusals },
        },
      },
      '/v1/keys/{id}': {
        delete: { operationId: 'revokeKey', summary: 'Revokes a key; answers once no instance accepts it.', parameters: [keyId], responses: { 204: { description: 'revoked' }, ...refusals } },
      },
      '/v1/keys/{id}/rotate': {
        post: {
          operationId: 'rotateKey', summary: 'A new key with the old one\'s rules; the old one works until `overlap` ends (default 0: revoked at once).', parameters: [keyId],
          requestBody: { required: false, content: { 'application/json': { schema: { type: 'object', properties: { overlap: { type: 'string', examples: ['24h'] } } } } } },
          responses: { 201: json('the new key', ref('CreatedApiKey')), ...refusals },
        },
      },
      '/v1/users': {
        get: { operationId: 'listUsers', summary: 'The users kept in the store (never a hash).', responses: { 200: json('the users', { type: 'object', properties: { users: { type: 'array', items: ref('StoreUser') } } }), ...refusals } },
        post: {
          operationId: 'addUser', summary: 'Adds a user; every instance accepts it at once.',
          requestBody: body({ type: 'object', required: ['name', 'password'], properties: { name: { type: 'string' }, password: { type: 'string', minLength: 8 }, groups: list } }),
          responses: { 201: json('added', ref('StoreUser')), 409: problem('the name is taken (in the store or the users file), or differs from a users-file name only by case'), ...refusals },
        },
      },
      '/v1/users/{name}': {
        delete: { operationId: 'removeUser', summary: 'Removes a user; its sessions end on every instance.', parameters: [userName], responses: { 204: { description: 'removed' }, ...refusals } },
      },
      '/v1/users/{name}/password': {
        put: {
          operationId: 'setPassword', summary: 'Changes the password; the user\'s sessions end on every instance.', parameters: [userName],
          requestBody: body({ type: 'object', required: ['password'], properties: { password: { type: 'string', minLength: 8 } } }), responses: { 204: { description: 'changed' }, ...refusals },
        },
      },
      '/v1/users/{name}/groups': {
        put: {
          operationId: 'setGroups', summary: 'Replaces the user\'s groups.', parameters: [userName],
          requestBody: body({ type: 'object', required: ['groups'], properties: { groups: list } }), responses: { 200: json('set', ref('StoreUser')), ...refusals },
        },
      },
    });
  }
  const apiKey = {
    type: 'object',
    properties: {
      id: { type: 'string' }, name: { type: 'string' }, user: { type: 'string' }, groups: { type: 'array', items: { type: 'string' } },
      routes: { type: 'array', items: { type: 'string' } }, methods: { type: 'array', items: { type: 'string' } },
      expiresAtMs: { type: 'integer' }, rate: { type: 'object', properties: { requests: { type: 'integer' }, windowSeconds: { type: 'integer' } } },
      createdAtMs: { type: 'integer' }, lastUsedAtMs: { type: 'integer' }, rotatedTo: { type: 'string' },
    },
  };
  return {
    openapi: '3.1.0',
    info: { title: 'auth-gateway admin listener', version: '1' },
    security: apiOn ? [{ adminToken: [] }] : [],
    paths,
    components: {
      securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: 'admin.apiToken' } },
      schemas: {
        Problem: { type: 'object', required: ['type', 'title', 'status', 'detail', 'code'], properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' }, detail: { type: 'string' }, code: { type: 'string' } } },
        ApiKey: apiKey,
        CreatedApiKey: { allOf: [apiKey, { type: 'object', required: ['key'], properties: { key: { type: 'string', description: '<prefix>_<id>_<secret>: shown this once' } } }] },
        NewApiKey: {
          type: 'object', required: ['name'],
          properties: { name: { type: 'string' }, user: { type: 'string' }, groups: list, routes: list, methods: list, expiresIn: { type: 'string', examples: ['90d'] }, rate: { type: 'string', examples: ['100/60s'] } },
        },
        StoreUser: { type: 'object', properties: { name: { type: 'string' }, groups: { type: 'array', items: { type: 'string' } }, createdAtMs: { type: 'integer' }, changedAtMs: { type: 'integer' } } },
      },
    },
  };
}
