import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { apiKeyAuthenticator } from '../../src/auth/api-key.js';
import { ManualClock } from '../../src/clock.js';
import { upstreamHeaderObject } from '../../src/core/headers.js';
import type { Principal } from '../../src/core/principal.js';
import { DomainError } from '../../src/core/domain-error.js';
import { parseDuration, parseRate, readKeySpec } from '../../src/stores/tables/api-key-spec.js';
import { ApiKeys, parseKey, type ApiKeyRecord } from '../../src/stores/tables/api-keys.js';
import { MemoryTable } from '../../src/stores/tables/shared-table.js';
import { testConfig } from '../support/fixtures.js';
import { refusalOf, rejectionOf } from '../support/refusal.js';

const clock = new ManualClock();
const keys = () => new ApiKeys(new MemoryTable<ApiKeyRecord>(), () => clock.now());
const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;
const exchange = {} as never;

describe('key text', () => {
  it('parses only <prefix>_<id>_<secret> of its own prefix', () => {
    const secret = 'a_b-'.repeat(10) + 'xyz';
    expect(parseKey(`agk_0123456789abcdef_${secret}`, 'agk')).toEqual({ id: '0123456789abcdef', secret });
    for (const text of [`agk_0123456789ABCDEF_${secret}`, `agx_0123456789abcdef_${secret}`, `agk_0123456789abcdef_${secret}x`, `agk_0123456789abcdef-${secret}`, 'agk_', 'eyJhbGciOiJIUzI1NiJ9.e30.x']) {
      expect(parseKey(text, 'agk'), text).toBeUndefined();
    }
  });

  it('reads durations, rates and a key spec, naming every problem', () => {
    expect([parseDuration('90d'), parseDuration('24h'), parseDuration('30m'), parseDuration('45'), parseDuration('0'), parseDuration('1y')]).toEqual([7_776_000, 86_400, 1800, 45, undefined, undefined]);
    expect([parseRate('100/60s'), parseRate('10/m'), parseRate('0/1s'), parseRate('5')]).toEqual([{ requests: 100, windowSeconds: 60 }, { requests: 10, windowSeconds: 60 }, undefined, undefined]);
    expect(readKeySpec({ name: 'ci', groups: 'a, b', methods: 'get,HEAD', routes: '/v1/x' })).toEqual({
      spec: { name: 'ci', groups: ['a', 'b'], routes: ['/v1/x'], methods: ['GET', 'HEAD'] }, problems: [],
    });
    expect(readKeySpec({ routes: 'v1', expiresIn: 'soon', rate: 'many' }).problems).toHaveLength(4);
  });

  it('refuses scopes no request can ever match, naming each: a method the gateway cannot receive, a route with a dot segment', () => {
    const { problems } = readKeySpec({ name: 'ci', methods: ['GET', 'FETCH', 'get2'], routes: ['/api/list/../admin', '/api/./x', '/..', '/api/...', '/v1/x.y'] });
    expect(problems).toEqual([
      expect.stringContaining('"/api/list/../admin"'),
      expect.stringContaining('"/api/./x"'),
      expect.stringContaining('"/.."'),
      expect.stringContaining('"FETCH"'),
      expect.stringContaining('"GET2"'),
    ]);
    // Lower case is read as the method it spells (requests' methods are upper case), as in allow rules.
    expect(readKeySpec({ name: 'ci', methods: ['get', 'propfind'] })).toEqual({ spec: { name: 'ci', groups: [], routes: [], methods: ['GET', 'PROPFIND'] }, problems: [] });
  });
});

describe('ApiKeys', () => {
  it('keeps only the SHA-256 of the secret; judges the secret, then the expiry', async () => {
    const k = keys();
    const { record, key } = await k.create({ name: 'ci', expiresInSeconds: 60 }, 'agk');
    const presented = parseKey(key, 'agk')!;
    expect(JSON.stringify(await k.table.all())).not.toContain(presented.secret);
    expect(record.user).toBe('ci');
    expect(k.judge(k.lookupNow(record.id)!, presented)).toBeUndefined();
    expect(k.judge(k.lookupNow(record.id)!, { ...presented, secret: presented.secret.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')) })).toBe('unknown');
    expect(k.judge(null, presented)).toBe('unknown');
    // The kept digest is what decides: one differing in its first or last character, or of another length, refuses.
    const kept = k.lookupNow(record.id)!;
    const flip = (c: string) => (c === 'A' ? 'B' : 'A');
    expect(kept.sha256).toBe(createHash('sha256').update(presented.secret).digest('base64url'));
    for (const sha256 of [flip(kept.sha256[0]!) + kept.sha256.slice(1), kept.sha256.slice(0, -1) + flip(kept.sha256.at(-1)!), kept.sha256.slice(0, -1), `${kept.sha256}A`, '']) {
      expect(k.judge({ ...kept, sha256 }, presented)).toBe('unknown');
    }
    clock.advance(60_000);
    expect(k.judge(k.lookupNow(record.id)!, presented)).toBe('expired');
  });

  it('rotates: the old key ends with the overlap (or at once), the new one keeps the old one\'s rules and lifetime', async () => {
    const k = keys();
    const { record } = await k.create({ name: 'ci', groups: ['g'], routes: ['/v1/r'], rate: { requests: 5, windowSeconds: 60 }, expiresInSeconds: 3600 }, 'agk');
    const rotated = (await k.rotate(record.id, 600, 'agk'))!;
    expect(rotated.record).toMatchObject({ name: 'ci', groups: ['g'], routes: ['/v1/r'], rate: { requests: 5, windowSeconds: 60 }, expiresAtMs: clock.now() + 3_600_000 });
    expect(k.lookupNow(record.id)).toMatchObject({ expiresAtMs: clock.now() + 600_000, rotatedTo: rotated.record.id });
    const again = (await k.rotate(rotated.record.id, 0, 'agk'))!;
    expect(k.lookupNow(rotated.record.id)).toBeNull();
    expect(k.lookupNow(again.record.id)).not.toBeNull();
    expect(await k.rotate('0000000000000000', 0, 'agk')).toBeNull();
  });

  it('notes the last use at most once a minute per key', async () => {
    const k = keys();
    const { record, key } = await k.create({ name: 'ci' }, 'agk');
    const presented = parseKey(key, 'agk')!;
    const lastUsed = async () => (await k.list())[0]!.lastUsedAtMs;
    k.judge(k.lookupNow(record.id)!, presented);
    const first = await lastUsed();
    expect(first).toBe(clock.now());
    clock.advance(30_000);
    k.judge(k.lookupNow(record.id)!, presented);
    expect(await lastUsed()).toBe(first);
    clock.advance(30_000);
    k.judge(k.lookupNow(record.id)!, presented);
    expect(await lastUsed()).toBe(clock.now());
  });
});

describe('the api-key authenticator', () => {
  const config = { header: 'X-Api-Key', prefix: 'agk' };

  it('takes keys from its header or as a bearer credential of its prefix, and nothing else', async () => {
    const k = keys();
    const auth = apiKeyAuthenticator(k, config);
    const { key } = await k.create({ name: 'ci', groups: ['ops'], methods: ['GET'] }, 'agk');
    expect(auth.parse(request({ 'x-api-key': key }))).toEqual(parseKey(key, 'agk'));
    expect(auth.parse(request({ authorization: `Bearer ${key}` }))).toEqual(parseKey(key, 'agk'));
    expect(auth.parse(request({ authorization: 'Bearer eyJhbGciOiJIUzI1NiJ9.e30.x' }))).toBeUndefined();
    expect(auth.parse(request({ authorization: 'Basic YTpi' }))).toBeUndefined();
    expect(() => auth.parse(request({ 'x-api-key': 'nonsense' }))).toThrow(DomainError);
    // A key and an Authorization header: one credential per request (a forwarded Authorization would be unjudged).
    expect(refusalOf(() => auth.parse(request({ 'x-api-key': key, authorization: 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.' }))))
      .toMatchObject({ status: 400, code: 'invalid_request' });
    // Verified without a promise (the memory table knows); the principal carries the key's groups and rules.
    const principal = auth.verify(parseKey(key, 'agk')!, exchange) as Principal;
    expect(principal).toMatchObject({ user: 'ci', via: 'api_key', groups: ['ops'], ambient: false, credential: { name: 'ci', methods: ['GET'], routes: [] } });
    // A refusal is decided on a store read (a promise), for an unknown id and a wrong secret alike.
    for (const presented of [{ id: '0000000000000000', secret: 'x'.repeat(43) }, { ...parseKey(key, 'agk')!, secret: 'x'.repeat(43) }]) {
      const refused = auth.verify(presented, exchange);
      expect(refused).toBeInstanceOf(Promise);
      expect(await rejectionOf(refused)).toMatchObject({ status: 401, code: 'invalid_credentials' });
    }
  });

  it('a revoked key: its open tunnel\'s recheck says so', async () => {
    const k = keys();
    const auth = apiKeyAuthenticator(k, config);
    const { record, key } = await k.create({ name: 'ci' }, 'agk');
    const principal = auth.verify(parseKey(key, 'agk')!, exchange) as Principal;
    expect(await auth.recheck(principal)).toBeUndefined();
    await k.revoke(record.id);
    expect(await auth.recheck(principal)).toBe('api key revoked');
  });
});

describe('upstream headers', () => {
  it('never forward the key header (any spelling) or a key sent as a bearer credential, even where Authorization is forwarded', () => {
    const principal: Principal = { user: 'ci', via: 'api_key', groups: [], ownGroups: true, sid: undefined, expiresAt: undefined, ambient: false, proof: '', credential: undefined };
    const forward = (headers: Record<string, string>) => upstreamHeaderObject({ headers, socket: {} } as unknown as IncomingMessage, {
      principal, requestId: 'r', forwardAuthorization: true, allowHeaders: [], trustForwarded: false, reserved: undefined,
      consumed: { header: 'x-api-key', bearerPrefix: 'agk_' },
    });
    const out = forward({ 'x-api-key': 'agk_1', x_api_key: 'agk_2', authorization: 'bearer agk_3', accept: 'a' });
    expect(out['x-api-key']).toBeUndefined();
    expect(out.x_api_key).toBeUndefined();
    expect(out.authorization).toBeUndefined();
    expect(out.accept).toBe('a');
    expect(forward({ authorization: 'Bearer eyJ.x.y' }).authorization).toBe('Bearer eyJ.x.y');
  });
});

describe('configuration', () => {
  it('apiKeys: defaults, and a bad header or prefix named', () => {
    expect(testConfig('/dev/null', { apiKeys: {} }).apiKeys).toEqual({ header: 'X-API-Key', prefix: 'agk' });
    expect(testConfig('/dev/null', { apiKeys: true }).apiKeys).toEqual({ header: 'X-API-Key', prefix: 'agk' });
    expect(testConfig('/dev/null').apiKeys).toBeUndefined();
    expect(() => testConfig('/dev/null', { apiKeys: { header: 'Authorization', prefix: 'A_B' } })).toThrow(/apiKeys.header[\s\S]*apiKeys.prefix/);
    // X_Api_Key would be removed as x_api_key while a client sends X-Api-Key's _ spelling past it.
    expect(() => testConfig('/dev/null', { apiKeys: { header: 'X_Api_Key' } })).toThrow(/apiKeys.header must not contain _/);
    expect(() => testConfig('/dev/null', { identity: { assertion: { keyFile: '/dev/null', header: 'X_Identity' } } })).toThrow(/identity.assertion.header must not contain _/);
  });

  it('users.store makes users.htpasswd optional; without another source it stays required', () => {
    expect(testConfig('/dev/null', { users: { store: true } }).users).toMatchObject({ htpasswd: '', store: true });
    expect(() => testConfig('/dev/null', { users: {} })).toThrow(/users.htpasswd is required/);
  });
});
