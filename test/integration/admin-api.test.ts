import { describe, expect, it, beforeAll } from 'vitest';
import { basic, createTokens, gatewayFixture } from '../support/fixtures.js';

/** The admin API on the admin listener: API keys and users kept in the store, with the memory store (in this process). */

const TOKEN = 'admin-token-admin-token-admin-token-0123';
const gw = gatewayFixture({
  log: 'info',
  config: (f) => ({
    admin: { host: '127.0.0.1', port: 0, apiToken: TOKEN },
    apiKeys: {},
    users: { htpasswd: f.users.file, watch: false, store: true },
    upstreams: { up: { url: f.echo.url } },
    routes: [{ path: '/v1/x', upstream: 'up' }],
    log: { level: 'info', access: false },
  }),
});
let admin: string;
beforeAll(async () => {
  admin = `http://127.0.0.1:${await gw.gateway.listenAdmin(0, '127.0.0.1')}`;
});

const call = (method: string, path: string, body?: unknown, token = TOKEN) => fetch(`${admin}${path}`, {
  method,
  headers: { authorization: `Bearer ${token}`, 'x-admin-actor': 'ops-alice', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
  body: body === undefined ? undefined : JSON.stringify(body),
});
const publicStatus = async (headers: Record<string, string>) => {
  const res = await fetch(`${gw.base}/v1/x`, { headers });
  await res.arrayBuffer();
  return res.status;
};
const audits = () => gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'audit');

describe('the admin API', () => {
  it('asks for the admin token', async () => {
    for (const token of ['wrong', '']) {
      const res = await call('GET', '/v1/keys', undefined, token);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('invalid_token');
    }
  });

  it('keys: create, list, rotate, revoke; each change an audit line naming who made it, never the key', async () => {
    const created = await call('POST', '/v1/keys', { name: 'ci-bot', groups: ['ci'], rate: '100/60s' });
    expect(created.status).toBe(201);
    const { key, id } = (await created.json()) as { key: string; id: string; sha256?: string };
    expect(key).toMatch(/^agk_[0-9a-f]{16}_/);
    // The secret is all after the id; it is base64url, so it may hold (or start with) an underscore itself.
    const secret = key.slice('agk_'.length + 16 + 1);
    expect(secret.length).toBeGreaterThan(20);
    expect(await publicStatus({ 'x-api-key': key })).toBe(200);
    const listed = (await (await call('GET', '/v1/keys')).json()) as { keys: Array<Record<string, unknown>> };
    expect(listed.keys.find((k) => k.id === id)).toMatchObject({ name: 'ci-bot', groups: ['ci'], rate: { requests: 100, windowSeconds: 60 } });
    expect(JSON.stringify(listed)).not.toContain(secret);
    expect(JSON.stringify(listed)).not.toContain('sha256');
    const rotated = await call('POST', `/v1/keys/${id}/rotate`, { overlap: '1h' });
    expect(rotated.status).toBe(201);
    const next = (await rotated.json()) as { key: string; id: string };
    expect(await publicStatus({ 'x-api-key': key })).toBe(200);
    expect(await publicStatus({ 'x-api-key': next.key })).toBe(200);
    expect((await call('DELETE', `/v1/keys/${id}`)).status).toBe(204);
    expect(await publicStatus({ 'x-api-key': key })).toBe(401);
    expect((await call('DELETE', `/v1/keys/${id}`)).status).toBe(404);
    const bad = await call('POST', '/v1/keys', { name: 'x', rate: 'lots' });
    expect(bad.status).toBe(400);
    expect(audits().map((a) => a.action)).toEqual(expect.arrayContaining(['key created', 'key rotated', 'key revoked']));
    expect(audits().find((a) => a.action === 'key created')).toMatchObject({ by: 'admin-api', actor: 'ops-alice', address: '127.0.0.1', keyId: id, keyName: 'ci-bot' });
    expect(gw.logs.join('\n')).not.toContain(secret);
  });

  it('a key scope that could never match is refused (400 naming it); a lower-case method is read as upper case', async () => {
    for (const [scope, named] of [[{ methods: ['FETCH'] }, 'FETCH'], [{ routes: ['/api/list/../admin'] }, '/api/list/../admin'], [{ routes: ['/v1/./x'] }, '/v1/./x']] as const) {
      const res = await call('POST', '/v1/keys', { name: 'scoped', ...scope });
      expect(res.status, named).toBe(400);
      const problem = (await res.json()) as { code: string; detail: string };
      expect(problem.code).toBe('invalid_request');
      expect(problem.detail).toContain(`"${named}"`);
    }
    expect(audits().filter((a) => a.keyName === 'scoped')).toEqual([]);
    const lower = await call('POST', '/v1/keys', { name: 'lower', methods: ['get'], routes: ['/v1/x'] });
    expect(lower.status).toBe(201);
    const { key, methods } = (await lower.json()) as { key: string; methods: string[] };
    expect(methods).toEqual(['GET']);
    expect(await publicStatus({ 'x-api-key': key })).toBe(200);
  });

  it('users: add, set groups, change the password, remove; sessions end with a changed password or a removal', async () => {
    expect((await call('POST', '/v1/users', { name: 'carol', password: 'carol-password', groups: 'ops' })).status).toBe(201);
    expect(await publicStatus({ authorization: basic('carol', 'carol-password') })).toBe(200);
    expect((await call('POST', '/v1/users', { name: 'carol', password: 'carol-password' })).status).toBe(409);
    expect((await call('POST', '/v1/users', { name: 'alice', password: 'alice-password' })).status).toBe(409);
    // Nor another spelling of it: it would sign in as a principal of its own.
    for (const name of ['Alice', 'ALICE', 'ａlice']) {
      const cased = await call('POST', '/v1/users', { name, password: 'alice-password' });
      expect(cased.status, name).toBe(409);
      expect(await cased.json()).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('differs from "alice" of the users file only by case') });
      expect(await publicStatus({ authorization: basic(name, 'alice-password') })).toBe(401);
    }
    expect(((await (await call('PUT', '/v1/users/carol/groups', { groups: ['dev'] })).json()) as { groups: string[] }).groups).toEqual(['dev']);
    const tokens = await createTokens(gw.base, 'carol', 'carol-password');
    expect((await call('PUT', '/v1/users/carol/password', { password: 'carol-new-password' })).status).toBe(204);
    expect(await publicStatus({ authorization: basic('carol', 'carol-password') })).toBe(401);
    expect(await publicStatus({ authorization: `Bearer ${tokens.accessToken}` })).toBe(401);
    expect(await publicStatus({ authorization: basic('carol', 'carol-new-password') })).toBe(200);
    const listed = (await (await call('GET', '/v1/users')).json()) as { users: Array<{ name: string; groups: string[] }> };
    expect(listed.users).toEqual([expect.objectContaining({ name: 'carol', groups: ['dev'] })]);
    expect((await call('DELETE', '/v1/users/carol')).status).toBe(204);
    expect(await publicStatus({ authorization: basic('carol', 'carol-new-password') })).toBe(401);
    expect(audits().map((a) => a.action)).toEqual(expect.arrayContaining(['user added', 'user groups set', 'user password changed', 'user removed']));
    expect(gw.logs.join('\n')).not.toContain('carol-new-password');
  });

  it('is described in the admin listener\'s /openapi.json', async () => {
    const doc = (await (await fetch(`${admin}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/keys', '/v1/keys/{id}', '/v1/keys/{id}/rotate', '/v1/users', '/v1/users/{name}', '/v1/users/{name}/password', '/v1/users/{name}/groups']));
  });
});

describe('without admin.apiToken', () => {
  const off = gatewayFixture({ config: () => ({ admin: { host: '127.0.0.1', port: 0 }, apiKeys: {} }) });
  it('the admin API is off: 404, and its document names no admin paths', async () => {
    const base = `http://127.0.0.1:${await off.gateway.listenAdmin(0, '127.0.0.1')}`;
    const res = await fetch(`${base}/v1/keys`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(404);
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).not.toContain('/v1/keys');
  });
});
