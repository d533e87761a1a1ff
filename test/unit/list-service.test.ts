import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createListService } from '../../examples/list-service/service.js';
import type { Contact, Conversation, ListServiceOptions, Page, Problem } from '../../examples/list-service/service.js';

const servers: Server[] = [];

async function start(options?: ListServiceOptions): Promise<string> {
  const server = createListService(options);
  servers.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return `http://127.0.0.1:${port}`;
}

interface Reply<T> {
  status: number;
  headers: Headers;
  body: T;
}

async function call<T>(base: string, path: string, init?: RequestInit): Promise<Reply<T>> {
  const response = await fetch(`${base}${path}`, init);
  const body = (await response.json()) as T;
  return { status: response.status, headers: response.headers, body };
}

const ENVELOPE_KEYS = ['content', 'first', 'last', 'numberOfElements', 'pageable', 'totalElements', 'totalPages'];
const PROBLEM_KEYS = ['code', 'detail', 'status', 'title', 'type'];

function ids(page: Page<{ id: string }>): string[] {
  return page.content.map((record) => record.id);
}

function isOrdered<T>(values: readonly T[], compare: (a: T, b: T) => number): boolean {
  return values.every((value, index) => index === 0 || compare(values[index - 1] as T, value) <= 0);
}

const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

let base: string;
let small: string;

beforeAll(async () => {
  base = await start();
  small = await start({ records: 45, seed: 7 });
});

afterAll(async () => {
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
});

describe('page envelope', () => {
  it('serves page 0 with size 10', async () => {
    const reply = await call<Page<Conversation>>(base, '/v1/conversations?size=10&page=0');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toBe('application/json');
    expect(Object.keys(reply.body).sort()).toEqual(ENVELOPE_KEYS);
    expect(reply.body.pageable).toEqual({ pageNumber: 0, pageSize: 10, offset: 0 });
    expect(reply.body).toMatchObject({ totalPages: 100, totalElements: 1000, numberOfElements: 10, first: true, last: false });
    expect(ids(reply.body)[0]).toBe('conv-000001');
    for (const record of reply.body.content) {
      expect(Object.keys(record).sort()).toEqual(['campaignId', 'createdAt', 'id', 'status', 'subject']);
      expect(record.campaignId).toMatch(/^cmp-\d{3}$/);
      expect(['open', 'closed', 'pending']).toContain(record.status);
      expect(new Date(record.createdAt).toISOString()).toBe(record.createdAt);
    }
  });

  it('serves page 1 with size 10 at offset 10', async () => {
    const page1 = await call<Page<Conversation>>(base, '/v1/conversations?size=10&page=1');
    const twenty = await call<Page<Conversation>>(base, '/v1/conversations?size=20');
    expect(page1.body.pageable).toEqual({ pageNumber: 1, pageSize: 10, offset: 10 });
    expect(page1.body).toMatchObject({ totalPages: 100, numberOfElements: 10, first: false, last: false });
    expect(page1.body.content).toEqual(twenty.body.content.slice(10));
  });

  it('defaults to page 0 of size 20', async () => {
    const reply = await call<Page<Contact>>(base, '/v1/contacts');
    expect(reply.body.pageable).toEqual({ pageNumber: 0, pageSize: 20, offset: 0 });
    expect(reply.body).toMatchObject({ totalPages: 50, totalElements: 1000, numberOfElements: 20, first: true });
    for (const contact of reply.body.content) {
      expect(contact.phoneNumber).toMatch(/^\+49\d{11}$/);
      expect(contact.email).toMatch(/^[a-z]+\.[a-z]+\.\d+@example\.com$/);
    }
  });

  it('marks the last page, which may be partial', async () => {
    const reply = await call<Page<Conversation>>(small, '/v1/conversations?size=20&page=2');
    expect(reply.body).toMatchObject({ totalPages: 3, totalElements: 45, numberOfElements: 5, first: false, last: true });
    expect(reply.body.content).toHaveLength(5);
  });

  it('serves an empty page past the end', async () => {
    const reply = await call<Page<Conversation>>(small, '/v1/conversations?size=20&page=3');
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      content: [],
      pageable: { pageNumber: 3, pageSize: 20, offset: 60 },
      totalPages: 3,
      totalElements: 45,
      numberOfElements: 0,
      last: true,
      first: false,
    });
  });
});

describe('sorting', () => {
  it('sorts by campaignId ascending, stable on ties', async () => {
    const reply = await call<Page<Conversation>>(base, '/v1/conversations?size=200&sort=campaignId');
    const explicit = await call<Page<Conversation>>(base, '/v1/conversations?size=200&sort=campaignId,asc');
    expect(explicit.body).toEqual(reply.body);
    expect(isOrdered(reply.body.content, (a, b) => byString(a.campaignId, b.campaignId) || byString(a.id, b.id))).toBe(true);
  });

  it('sorts by campaignId descending, direction case-insensitive', async () => {
    const reply = await call<Page<Conversation>>(base, '/v1/conversations?size=200&sort=campaignId,DESC');
    expect(reply.body.content[0]?.campaignId).toBe('cmp-025');
    expect(isOrdered(reply.body.content, (a, b) => byString(b.campaignId, a.campaignId) || byString(a.id, b.id))).toBe(true);
  });

  it('applies several sorts in order as tie-breakers', async () => {
    const all: Conversation[] = [];
    for (let page = 0; page < 5; page += 1) {
      all.push(...(await call<Page<Conversation>>(base, `/v1/conversations?size=200&page=${page}`)).body.content);
    }
    const expected = [...all].sort((a, b) => byString(b.campaignId, a.campaignId) || byString(a.createdAt, b.createdAt));
    const reply = await call<Page<Conversation>>(base, '/v1/conversations?size=50&page=3&sort=campaignId,desc&sort=createdAt');
    expect(reply.body.content).toEqual(expected.slice(150, 200));
  });

  it('sorts contacts by name', async () => {
    const reply = await call<Page<Contact>>(base, '/v1/contacts?size=200&sort=name,asc&sort=id,desc');
    expect(isOrdered(reply.body.content, (a, b) => byString(a.name, b.name) || byString(b.id, a.id))).toBe(true);
  });
});

describe('errors', () => {
  it.each([
    'size=0', 'size=201', 'size=abc', 'size=1.5', 'size=-1', 'size=', 'size=+5', 'size=10&size=20',
    'page=-1', 'page=x', 'page=1e3', 'page=99999999999999999999',
    'sort=subject', 'sort=campaignId,sideways', 'sort=campaignId,asc,id', 'sort=', 'sort=id&sort=nope',
  ])('rejects %s with 400 problem+json', async (query) => {
    const reply = await call<Problem>(base, `/v1/conversations?${query}`);
    expect(reply.status).toBe(400);
    expect(reply.headers.get('content-type')).toBe('application/problem+json');
    expect(Object.keys(reply.body).sort()).toEqual(PROBLEM_KEYS);
    expect(reply.body).toMatchObject({ status: 400, code: 'invalid_paging', title: 'Bad Request' });
  });

  it('rejects a property only other lists can sort by', async () => {
    expect((await call<Problem>(base, '/v1/contacts?sort=campaignId')).status).toBe(400);
    expect((await call<Problem>(base, '/v1/conversations?sort=name')).status).toBe(400);
  });

  it.each(['POST', 'PUT', 'DELETE', 'PATCH'])('answers %s with 405 and Allow: GET', async (method) => {
    const reply = await call<Problem>(base, '/v1/conversations', { method });
    expect(reply.status).toBe(405);
    expect(reply.headers.get('allow')).toBe('GET');
    expect(reply.body).toMatchObject({ status: 405, code: 'method_not_allowed' });
  });

  it.each(['/', '/nope', '/v1/conversations/', '/v1/conversation', '/v1/contacts/phoneNumber/x'])('answers %s with 404', async (path) => {
    const reply = await call<Problem>(base, path);
    expect(reply.status).toBe(404);
    expect(reply.headers.get('content-type')).toBe('application/problem+json');
    expect(reply.body).toMatchObject({ status: 404, code: 'not_found' });
  });
});

describe('phone number lookup', () => {
  it('finds the contacts with that number', async () => {
    const contact = (await call<Page<Contact>>(base, '/v1/contacts?size=1&page=17')).body.content[0] as Contact;
    const encoded = await call<Page<Contact>>(base, `/v1/contacts/phoneNumber?phoneNumber=${encodeURIComponent(contact.phoneNumber)}`);
    expect(encoded.status).toBe(200);
    expect(encoded.body.content).toContainEqual(contact);
    expect(encoded.body.content.every((found) => found.phoneNumber === contact.phoneNumber)).toBe(true);
    expect(encoded.body).toMatchObject({ totalElements: encoded.body.content.length, first: true, last: true });
    const unencoded = await call<Page<Contact>>(base, `/v1/contacts/phoneNumber?phoneNumber=${contact.phoneNumber}`);
    expect(unencoded.body).toEqual(encoded.body);
  });

  it('serves an empty page for an unknown number', async () => {
    const reply = await call<Page<Contact>>(base, '/v1/contacts/phoneNumber?phoneNumber=%2B4900000000000');
    expect(reply.body).toMatchObject({ content: [], totalElements: 0, totalPages: 0, numberOfElements: 0, first: true, last: true });
  });

  it('lists all contacts by phone number when the parameter is absent', async () => {
    const reply = await call<Page<Contact>>(base, '/v1/contacts/phoneNumber?size=200&page=1');
    expect(reply.body.pageable).toEqual({ pageNumber: 1, pageSize: 200, offset: 200 });
    expect(reply.body.totalElements).toBe(1000);
    expect(isOrdered(reply.body.content, (a, b) => byString(a.phoneNumber, b.phoneNumber))).toBe(true);
  });

  it('pages and validates like the lists', async () => {
    expect((await call<Problem>(base, '/v1/contacts/phoneNumber?size=500')).status).toBe(400);
    expect((await call<Problem>(base, '/v1/contacts/phoneNumber?phoneNumber=')).status).toBe(400);
  });
});

describe('service', () => {
  it('answers /healthz', async () => {
    const reply = await call<unknown>(base, '/healthz');
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ status: 'ok' });
  });

  it('echoes the authenticated user it saw', async () => {
    const seen = await call<unknown>(base, '/v1/contacts?size=1', { headers: { 'x-authenticated-user': 'alice' } });
    expect(seen.headers.get('x-upstream-saw-user')).toBe('alice');
    expect(seen.headers.get('x-upstream-saw-query')).toBe('size=1');
    const unseen = await call<unknown>(base, '/v1/contacts?size=1');
    expect(unseen.headers.get('x-upstream-saw-user')).toBeNull();
  });

  it('is deterministic for a seed', async () => {
    const again = await start({ seed: 42, records: 1000 });
    const other = await start({ seed: 43 });
    for (const path of ['/v1/conversations?size=200&page=2', '/v1/contacts?size=200&page=4&sort=name']) {
      const [first, second, third] = await Promise.all([base, again, other].map((url) => call<Page<unknown>>(url, path)));
      expect(second?.body).toEqual(first?.body);
      expect(third?.body).not.toEqual(first?.body);
    }
  });

  it('refuses invalid options', () => {
    expect(() => createListService({ records: -1 })).toThrow(RangeError);
    expect(() => createListService({ seed: 1.5 })).toThrow(RangeError);
  });
});
