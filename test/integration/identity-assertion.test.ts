import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import type { Config } from '../../src/config/types.js';
import { JWKS_PATH } from '../../src/identity/jwks.js';
import { basic, createTokens, gatewayFixture, jwtPayload, testConfig } from '../support/fixtures.js';
import { newKeyPem } from '../support/assertion-keys.js';
import { assertionUpstream, type AssertionUpstream } from '../support/assertion-upstream.js';
import { writeGroups } from '../support/authz.js';

/**
 * Signed identity assertions: every proxied request and WebSocket handshake carries one, an upstream
 * verifies it with jose against the gateway's JWK Set, across a key rotation.
 */

let upstream: AssertionUpstream;
let keyFile: string;
const wsServer = createServer();
const handshakes: IncomingMessage[] = [];
new WebSocketServer({ server: wsServer }).on('connection', (ws, req) => {
  handshakes.push(req);
  ws.close();
});
const oldKey = newKeyPem('ES256');
const newKey = newKeyPem('ES256');
const alice = basic('alice', 'alice-pw');

const gw = gatewayFixture({
  users: { alice: 'alice-pw', bob: 'bob-pw' },
  echo: false,
  before: async (f) => {
    writeGroups(f.users.dir, { admins: ['alice'], ops: ['alice'] });
    keyFile = join(f.users.dir, 'assertion-key.pem');
    writeFileSync(keyFile, oldKey);
    // jose's defaults but a short cooldown, so the test need not wait 30 s for a refetch on a new kid.
    upstream = await assertionUpstream({ jwksUrl: () => `${f.base}${JWKS_PATH}`, audience: 'reports', alg: 'ES256', cooldownMs: 200 });
    await new Promise<void>((resolve) => wsServer.listen(0, '127.0.0.1', resolve));
  },
  config: () => settings(),
  after: async () => {
    await upstream?.close();
    wsServer.closeAllConnections();
    await new Promise((resolve) => wsServer.close(resolve));
  },
});

function settings() {
  return {
    users: { htpasswd: gw.users.file, groups: join(gw.users.dir, 'users.groups'), watch: false },
    identity: { assertion: { keyFile } },
    upstreams: { reports: { url: upstream.url }, live: { url: `http://127.0.0.1:${(wsServer.address() as { port: number }).port}` } },
    routes: [
      { path: '/v1/reports', upstream: 'reports' },
      { path: '/v1/other', upstream: 'reports', audience: 'other-api' },
      { path: '/v1/live', upstream: 'live' },
    ],
  };
}

function config(): Config {
  return testConfig(gw.users.file, settings());
}

describe('identity assertions', () => {
  it('a proxied request carries one the upstream verifies with jose: iss, sub, aud, groups, via, iat, exp (60 s)', async () => {
    const res = await fetch(`${gw.base}/v1/reports`, { headers: { authorization: alice } });
    expect(res.status).toBe(200);
    const v = upstream.seen.at(-1)!;
    expect(v.error).toBeUndefined();
    expect(v.claims).toMatchObject({ iss: 'auth-gateway', sub: 'alice', aud: 'reports', groups: ['admins', 'ops'], via: 'basic' });
    expect(v.claims!.exp! - v.claims!.iat!).toBe(60);
  });

  it('the same assertion serves the next requests of that user (no signature per request); bearer gets its own', async () => {
    await fetch(`${gw.base}/v1/reports`, { headers: { authorization: alice } });
    await fetch(`${gw.base}/v1/reports/1`, { headers: { authorization: alice } });
    const [a, b] = upstream.seen.slice(-2);
    expect(a!.token).toBe(b!.token);
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    await fetch(`${gw.base}/v1/reports`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(upstream.seen.at(-1)!.claims).toMatchObject({ sub: 'alice', via: 'bearer' });
  });

  it('a route\'s audience is the aud (an upstream expecting another audience refuses it)', async () => {
    const res = await fetch(`${gw.base}/v1/other`, { headers: { authorization: basic('bob', 'bob-pw') } });
    expect(res.status).toBe(401);
    expect(upstream.seen.at(-1)!.error).toMatch(/aud/);
    const claims = jwtPayload(upstream.seen.at(-1)!.token!);
    expect(claims).toMatchObject({ aud: 'other-api', sub: 'bob', groups: [] });
  });

  it('a client-sent assertion never reaches the upstream, in any spelling', async () => {
    const forged = upstream.seen[0]!.token!;
    const res = await fetch(`${gw.base}/v1/reports`, { headers: { authorization: basic('bob', 'bob-pw'), 'x-identity-assertion': forged, 'x-identity_assertion': forged } });
    expect(res.status).toBe(200);
    const v = upstream.seen.at(-1)!;
    expect(v.claims!.sub).toBe('bob');
    expect(v.headers['x-identity_assertion']).toBeUndefined();
  });

  it('a WebSocket handshake carries one too', async () => {
    await new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/live`, { headers: { authorization: alice, 'x-identity-assertion': 'forged' } });
      ws.once('close', () => resolve());
      ws.once('error', reject);
    });
    const token = handshakes.at(-1)!.headers['x-identity-assertion'] as string;
    const { payload } = await jwtVerify(token, createRemoteJWKSet(new URL(`${gw.base}${JWKS_PATH}`)), { audience: 'live', issuer: 'auth-gateway' });
    expect(payload.sub).toBe('alice');
  });
});

describe('the JWK Set', () => {
  it('is served without credentials, with caching headers and an ETag (304 on a match), only the public halves', async () => {
    const res = await fetch(`${gw.base}${JWKS_PATH}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/jwk-set+json');
    expect(res.headers.get('cache-control')).toBe('public, max-age=300');
    const etag = res.headers.get('etag')!;
    const set = await res.json() as { keys: Array<Record<string, string>> };
    expect(set.keys).toHaveLength(1);
    expect(set.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(set.keys[0]).not.toHaveProperty('d');
    expect((await fetch(`${gw.base}${JWKS_PATH}`, { headers: { 'if-none-match': etag } })).status).toBe(304);
    expect((await fetch(`${gw.base}${JWKS_PATH}`, { method: 'HEAD' })).status).toBe(200);
  });

  it('/openapi.json documents it', async () => {
    const doc = await (await fetch(`${gw.base}/openapi.json`)).json() as { paths: Record<string, unknown> };
    expect(doc.paths[JWKS_PATH]).toBeDefined();
  });
});

// Last: it rotates the key.
describe('key rotation', () => {
  it('publish the new key, then sign with it while the old one stays published until its assertions expired', async () => {
    await fetch(`${gw.base}/v1/reports`, { headers: { authorization: alice } });
    const oldAssertion = upstream.seen.at(-1)!;
    expect(oldAssertion.ok).toBe(true);
    const oldKid = oldAssertion.kid!;

    // 1. The new key is published, the old one still signs.
    writeFileSync(keyFile, oldKey + newKey);
    gw.gateway.reload(config());
    const published = await (await fetch(`${gw.base}${JWKS_PATH}`)).json() as { keys: Array<{ kid: string }> };
    expect(published.keys.map((k) => k.kid)).toEqual([oldKid, expect.any(String)]);
    const newKid = published.keys[1]!.kid;
    await fetch(`${gw.base}/v1/reports`, { headers: { authorization: alice } });
    expect(upstream.seen.at(-1)!.kid).toBe(oldKid);

    // 2. The new key signs; the old one stays published. The upstream (its cached set predates the
    // new kid) fetches the set again and verifies.
    writeFileSync(keyFile, newKey + oldKey);
    gw.gateway.reload(config());
    await new Promise((r) => setTimeout(r, 250));
    await fetch(`${gw.base}/v1/reports`, { headers: { authorization: alice } });
    const rotated = upstream.seen.at(-1)!;
    expect(rotated.error).toBeUndefined();
    expect(rotated.kid).toBe(newKid);
    // An assertion signed before the switch still verifies, for anyone fetching the set now.
    const fresh = createRemoteJWKSet(new URL(`${gw.base}${JWKS_PATH}`));
    expect((await jwtVerify(oldAssertion.token!, fresh, { audience: 'reports' })).protectedHeader.kid).toBe(oldKid);

    // 3. Once the old assertions have expired, the old key goes; what it signed verifies no more.
    writeFileSync(keyFile, newKey);
    gw.gateway.reload(config());
    const after = createRemoteJWKSet(new URL(`${gw.base}${JWKS_PATH}`));
    await expect(jwtVerify(oldAssertion.token!, after, { audience: 'reports' })).rejects.toThrow();
    await fetch(`${gw.base}/v1/reports`, { headers: { authorization: alice } });
    expect(upstream.seen.at(-1)).toMatchObject({ ok: true, kid: newKid });
  });
});
