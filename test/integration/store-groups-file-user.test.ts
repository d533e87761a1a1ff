import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSync } from '../../src/credentials/bcrypt.js';
import { basic, echoUpstream, htpasswd, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';

// A name in both the users file and the store (the file gained it after the store had it): the file's
// line is in force, and so are the file's groups; the store's groups do not ride on the file's password.

let echo: EchoUpstream;
let users: Users;
let groupsDir: string;
let gw: RunningGateway;

beforeAll(async () => {
  echo = await echoUpstream();
  users = htpasswd({ carol: 'carol-file-pw', dave: 'dave-pw' });
  groupsDir = mkdtempSync(join(tmpdir(), 'gw-groups-'));
  writeFileSync(join(groupsDir, 'groups'), 'ops: dave\n');
  gw = await startGateway(testConfig(users.file, {
    users: { htpasswd: users.file, groups: join(groupsDir, 'groups'), watch: false, store: true },
    upstreams: { up: { url: echo.url } },
    routes: [{ path: '/v1/x', upstream: 'up' }, { path: '/v1/admin', upstream: 'up', allow: { groups: ['admins'] } }],
  }));
});

afterAll(async () => {
  await gw?.close();
  await echo?.close();
  users?.remove();
  rmSync(groupsDir, { recursive: true, force: true });
});

const status = async (authorization: string, path = '/v1/admin') => {
  const res = await fetch(`${gw.base}${path}`, { headers: { authorization } });
  await res.arrayBuffer();
  return res.status;
};

describe('a store user named like a file user', () => {
  it('gives the file user none of its groups; a store user of its own name keeps them', async () => {
    const store = gw.gateway.storeUsers!;
    await store.add('carol', hashSync('carol-store-pw', { cost: 4 }), ['admins']);
    await store.add('erin', hashSync('erin-pw', { cost: 4 }), ['admins']);
    const started = Date.now();
    while ((await status(basic('erin', 'erin-pw'))) !== 200) {
      if (Date.now() - started > 10_000) throw new Error('the store user erin was not taken within 10 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    // The file's carol signs in (the store's password does not), and is in no group.
    expect(await status(basic('carol', 'carol-file-pw'), '/v1/x')).toBe(200);
    expect(await status(basic('carol', 'carol-store-pw'), '/v1/x')).toBe(401);
    expect(await status(basic('carol', 'carol-file-pw'))).toBe(403);
  });
});
