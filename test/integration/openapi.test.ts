import type { Server } from 'node:http';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { createListService } from '../../examples/list-service/service.js';
import { basic, createTokens, gatewayFixture, postJson } from '../support/fixtures.js';

/**
 * The document at /openapi.json is kept true by validating real answers of the running gateway (and of
 * the example list service behind it) against the schemas it names for that path, method, status and
 * content type, with a real JSON Schema 2020-12 validator.
 */
type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { parameters?: Array<{ name: string; schema: Record<string, unknown> }>; responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>;
};

let list: Server;
let doc: Doc;
const ajv = new Ajv2020({ strict: false, allErrors: true });
const DOC_ID = 'https://auth-gateway.invalid/openapi.json';

const gw = gatewayFixture({
  echo: false,
  before: async () => {
    list = createListService({ records: 100 });
    await new Promise<void>((resolve) => list.listen(0, '127.0.0.1', resolve));
  },
  config: () => {
    const listUrl = `http://127.0.0.1:${(list.address() as { port: number }).port}`;
    return {
      upstreams: { conversations: { url: listUrl }, contacts: { url: listUrl } },
      routes: [
        { path: '/v1/conversations', upstream: 'conversations', paging: { sortable: ['campaignId', 'createdAt', 'id', 'status'] } },
        { path: '/v1/contacts', upstream: 'contacts', paging: { sizes: [10, 50], defaultSize: 10, sortable: ['name'] } },
      ],
    };
  },
  after: () => {
    list?.closeAllConnections();
    list?.close();
  },
});
beforeAll(async () => {
  const res = await fetch(`${gw.base}/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = (await res.json()) as Doc;
  ajv.addSchema({ ...doc, $id: DOC_ID });
});

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/** Validates a real response against the document: its status must be documented for the operation, its body must match. */
async function conforms(path: string, method: string, res: Response): Promise<unknown> {
  const operation = doc.paths[path]?.[method];
  expect(operation, `${method} ${path} is documented`).toBeDefined();
  const response = operation!.responses[String(res.status)];
  expect(response, `${method} ${path} documents ${res.status}`).toBeDefined();
  const text = await res.text();
  if (!response!.content) {
    expect(text).toBe('');
    return undefined;
  }
  const type = (res.headers.get('content-type') ?? '').split(';')[0]!;
  expect(Object.keys(response!.content), `${method} ${path} ${res.status} as ${type}`).toContain(type);
  const validate = ajv.compile({ $ref: `${DOC_ID}#/${pointer('paths', path, method, 'responses', String(res.status), 'content', type, 'schema')}` });
  const body: unknown = JSON.parse(text);
  expect(validate(body) ? [] : validate.errors).toEqual([]);
  return body;
}

describe('/openapi.json', () => {
  it('is an OpenAPI 3.1 document served without credentials, with a path per configured list route', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual(['/healthz', '/openapi.json', '/readyz', '/v1/contacts', '/v1/conversations', '/v1/tokens/create', '/v1/tokens/refresh', '/v1/tokens/revoke']);
    const size = doc.paths['/v1/contacts']!.get!.parameters!.find((p) => p.name === 'size')!;
    expect(size.schema).toEqual({ type: 'integer', enum: [10, 50], default: 10 });
    // The validator does bite: a wrong body fails.
    const problem = ajv.compile({ $ref: `${DOC_ID}#/components/schemas/Problem` });
    expect(problem({ type: 'urn:auth-gateway:problem:nope', title: 'x', status: 400, detail: '', code: 'nope' })).toBe(false);
    expect(ajv.compile({ $ref: `${DOC_ID}#/components/schemas/Page` })({ content: [] })).toBe(false);
    // Every schema the document holds compiles as JSON Schema 2020-12.
    for (const name of Object.keys((doc as unknown as { components: { schemas: object } }).components.schemas)) {
      expect(() => ajv.compile({ $ref: `${DOC_ID}#/components/schemas/${name}` })).not.toThrow();
    }
  });

  it('describes the token endpoints as they answer: create, refresh, revoke and their problems', async () => {
    const created = await conforms('/v1/tokens/create', 'post', await postJson(gw.base, '/v1/tokens/create', { appKey: 'alice', appSecret: 'alice-pw' })) as { refreshToken: string; accessToken: string };
    const refreshed = await conforms('/v1/tokens/refresh', 'post', await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: created.refreshToken })) as { accessToken: string };
    await conforms('/v1/tokens/revoke', 'post', await postJson(gw.base, '/v1/tokens/revoke', { token: refreshed.accessToken, type: 'ACCESS_TOKEN' }));

    await conforms('/v1/tokens/create', 'post', await postJson(gw.base, '/v1/tokens/create', { appKey: 'alice', appSecret: 'wrong' }));
    await conforms('/v1/tokens/create', 'post', await postJson(gw.base, '/v1/tokens/create', '{"appKey":'));
    await conforms('/v1/tokens/create', 'post', await postJson(gw.base, '/v1/tokens/create', { appKey: 'alice' }));
    await conforms('/v1/tokens/create', 'post', await fetch(`${gw.base}/v1/tokens/create`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' }));
    await conforms('/v1/tokens/create', 'post', await postJson(gw.base, '/v1/tokens/create', { appKey: 'a', appSecret: 'x'.repeat(20_000) }));
    await conforms('/v1/tokens/refresh', 'post', await postJson(gw.base, '/v1/tokens/refresh', { refreshToken: created.refreshToken }));
    await conforms('/v1/tokens/revoke', 'post', await postJson(gw.base, '/v1/tokens/revoke', { token: 'x', type: 'SOMETHING' }));
  });

  it('describes the list routes: a page envelope from the example service, paging and auth problems', async () => {
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    const bearer = { authorization: `Bearer ${accessToken}` };
    const page = await conforms('/v1/conversations', 'get', await fetch(`${gw.base}/v1/conversations?size=10&page=2&sort=campaignId,DESC&sort=id`, { headers: bearer })) as { content: unknown[] };
    expect(page.content).toHaveLength(10);
    await conforms('/v1/contacts', 'get', await fetch(`${gw.base}/v1/contacts?size=50`, { headers: { authorization: basic('alice', 'alice-pw') } }));
    for (const bad of ['size=15', 'page=-1', 'sort=unknown', 'sort=name,up']) {
      const res = await fetch(`${gw.base}/v1/contacts?${bad}`, { headers: bearer });
      expect(res.status).toBe(400);
      await conforms('/v1/contacts', 'get', res);
    }
    await conforms('/v1/contacts', 'get', await fetch(`${gw.base}/v1/contacts`));
    await conforms('/v1/contacts', 'get', await fetch(`${gw.base}/v1/contacts`, { headers: { authorization: 'Bearer not.a.jwt' } }));
  });

  it('describes the health endpoints', async () => {
    await conforms('/healthz', 'get', await fetch(`${gw.base}/healthz`));
    await conforms('/readyz', 'get', await fetch(`${gw.base}/readyz`));
  });

  it('matches the paging rules the gateway enforces: every documented size is accepted, sort by the pattern', async () => {
    const auth = { authorization: basic('alice', 'alice-pw') };
    const params = doc.paths['/v1/conversations']!.get!.parameters!;
    for (const size of params.find((p) => p.name === 'size')!.schema.enum as number[]) {
      expect((await fetch(`${gw.base}/v1/conversations?size=${size}`, { headers: auth })).status).toBe(200);
    }
    const sortItem = ajv.compile((params.find((p) => p.name === 'sort')!.schema as { items: object }).items);
    for (const value of ['createdAt', 'status,asc', 'id,Desc', 'createdAt,up', 'name', 'id,']) {
      const res = await fetch(`${gw.base}/v1/conversations?sort=${encodeURIComponent(value)}`, { headers: auth });
      expect(res.status === 200, `sort=${value}`).toBe(sortItem(value));
    }
  });
});

describe('the security schemes of /openapi.json', () => {
  const keyed = gatewayFixture({
    echo: false,
    config: () => ({ apiKeys: { header: 'X-Service-Key' }, upstreams: {}, routes: [] }),
  });

  it('name each identity source that is on, as its authenticator declares it', async () => {
    const plain = await (await fetch(`${gw.base}/openapi.json`)).json() as { security: unknown[]; components: { securitySchemes: Record<string, Record<string, unknown>> } };
    expect(Object.keys(plain.components.securitySchemes)).toEqual(['basic', 'bearer']);
    const withKeys = await (await fetch(`${keyed.base}/openapi.json`)).json() as typeof plain;
    expect(withKeys.components.securitySchemes.apiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-Service-Key' });
    expect(withKeys.security).toEqual([{ apiKey: [] }, { basic: [] }, { bearer: [] }]);
  });
});
