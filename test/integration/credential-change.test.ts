import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisSessionStore } from '../../src/stores/sessions/redis-session-store.js';
import { createTokens, gatewayFixture, jwtPayload, postJson, startGateway, testConfig, type RunningGateway } from '../support/fixtures.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

const gw = gatewayFixture({
  users: { alice: 'alice-pw', bob: 'bob-pw' },
  scope: 'each',
  config: (f) => ({
    upstreams: { up: { url: f.echo.url } },
    routes: [{ path: '/v1/conversations', upstream: 'up' }],
  }),
});

const list = (token: string) => fetch(`${gw.base}/v1/conversations`, { headers: { authorization: `Bearer ${token}` } });
const refresh = (refreshToken: string) => postJson(gw.base, '/v1/tokens/refresh', { refreshToken });

describe('tokens follow the users file', () => {
  it.each([
    ['removed from the file', { bob: 'bob-pw' }],
    ['given a new password', { alice: 'new-pw', bob: 'bob-pw' }],
  ])('a user %s loses its access and refresh tokens at once', async (_name, next) => {
    const alice = await createTokens(gw.base, 'alice', 'alice-pw');
    const bob = await createTokens(gw.base, 'bob', 'bob-pw');
    expect((await list(alice.accessToken)).status).toBe(200);
    gw.users.write(next);
    expect(gw.gateway.credentials.reload()).toBe(true);

    const refused = await list(alice.accessToken);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { code: string }).code).toBe('invalid_token');
    expect((await refresh(alice.refreshToken)).status).toBe(401);
    // bob's line was rewritten too (same password, new salt, so a new hash): tokens are bound to the
    // hash line, not to the password, so his end as well; only an unchanged line keeps its tokens.
    expect((await list(bob.accessToken)).status).toBe(401);
  });

  it('a reload that leaves a user line unchanged keeps its tokens', async () => {
    const alice = await createTokens(gw.base, 'alice', 'alice-pw');
    expect(gw.gateway.credentials.reload()).toBe(true);
    expect((await list(alice.accessToken)).status).toBe(200);
    expect((await refresh(alice.refreshToken)).status).toBe(200);
  });
});

describe('the uv claim', () => {
  const uvOf = (token: string) => (jwtPayload(token) as { uv: string }).uv;

  it('is keyed: not a plain digest of the htpasswd line; the same for every instance of one deployment, another for another deployment', async () => {
    const line = readFileSync(gw.users.file, 'utf8').split('\n').find((l) => l.startsWith('alice:'))!;
    const hash = line.slice('alice:'.length);
    const uv = uvOf((await createTokens(gw.base, 'alice', 'alice-pw')).accessToken);
    // Anyone holding a token could otherwise test a guessed or leaked htpasswd line against it.
    for (const unkeyed of [hash, line]) {
      for (const encoding of ['base64url', 'hex', 'base64'] as const) {
        const digest = createHash('sha256').update(unkeyed).digest(encoding);
        expect(digest.startsWith(uv.slice(0, 8)), `${encoding} digest`).toBe(false);
      }
    }
    const routes = { upstreams: { up: { url: gw.echo.url } }, routes: [{ path: '/v1/conversations', upstream: 'up' }] };
    const sibling = await startGateway(testConfig(gw.users.file, routes));
    const other = await startGateway(testConfig(gw.users.file, { ...routes, tokens: { signing: { alg: 'HS256', secret: 'another-deployment-another-deployment-0123' } } }));
    try {
      expect(uvOf((await createTokens(sibling.base, 'alice', 'alice-pw')).accessToken)).toBe(uv);
      expect(uvOf((await createTokens(other.base, 'alice', 'alice-pw')).accessToken)).not.toBe(uv);
    } finally {
      await sibling.close();
      await other.close();
    }
  });
});

describe('removing a user ends their sessions for good', () => {
  let redis: TestRedis | undefined;
  afterAll(async () => {
    await redis?.destroy();
  });

  it.each(['memory', 'redis'] as const)('%s store: the identical line put back revives no old token', async (kind) => {
    let running: RunningGateway = gw;
    if (kind === 'redis') {
      redis ??= await startRedis();
      running = await startGateway(testConfig(gw.users.file, {
        store: { kind: 'redis', url: redis.url, keyPrefix: `removal-${Date.now()}:` },
        upstreams: { up: { url: gw.echo.url } },
        routes: [{ path: '/v1/conversations', upstream: 'up' }],
      }));
      expect(await (running.gateway.store as RedisSessionStore).waitUntilReady(5000)).toBe(true);
    }
    const call = (token: string) => fetch(`${running.base}/v1/conversations`, { headers: { authorization: `Bearer ${token}` } });
    try {
      const original = readFileSync(gw.users.file, 'utf8');
      const old = await createTokens(running.base, 'alice', 'alice-pw');
      const other = await createTokens(running.base, 'alice', 'alice-pw');
      // The operator removes alice's line...
      writeFileSync(gw.users.file, original.split('\n').filter((l) => !l.startsWith('alice:')).join('\n'));
      expect(running.gateway.credentials.reload()).toBe(true);
      // ...and puts the very same line back (same hash, byte for byte).
      writeFileSync(gw.users.file, original);
      expect(running.gateway.credentials.reload()).toBe(true);
      // Her sessions were revoked in the store when the line went: nothing comes back.
      await expect.poll(() => running.gateway.store.listSessions('alice'), { timeout: 2000 }).toEqual([]);
      for (const pair of [old, other]) {
        expect((await call(pair.accessToken)).status).toBe(401);
        expect((await postJson(running.base, '/v1/tokens/refresh', { refreshToken: pair.refreshToken })).status).toBe(401);
      }
      // She signs in again as before.
      const fresh = await createTokens(running.base, 'alice', 'alice-pw');
      expect((await call(fresh.accessToken)).status).toBe(200);
    } finally {
      if (running !== gw) await running.close();
    }
  });
});
