import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConnections } from '../../src/cli/connect.js';
import { systemClock } from '../../src/clock.js';
import { DirectoryUsers } from '../../src/credentials/directory-users.js';
import { hashSync } from '../../src/credentials/bcrypt.js';
import { PasswordVerifier } from '../../src/credentials/password-verifier.js';
import { UserSources } from '../../src/credentials/user-sources.js';
import { createLogger, silentLogger } from '../../src/log.js';
import { MemorySessionStore } from '../../src/stores/sessions/memory-session-store.js';
import { basic, echoUpstream, htpasswd, postJson, startGateway, testConfig, type EchoUpstream, type RunningGateway, type Users } from '../support/fixtures.js';
import { closedPort } from '../support/process.js';
import { personDn, personLdif, startSlapd, type TestSlapd } from '../support/slapd.js';

// Users from a real OpenLDAP slapd (test/support/slapd.ts): Basic and token create bind as the user,
// groups come from groupOfNames entries, lockout counts, the directory can stop and come back.

let slapd: TestSlapd;
let echo: EchoUpstream;
let fileUsers: Users;

beforeAll(async () => {
  slapd = await startSlapd([
    { uid: 'alice', password: 'alice-pw', groups: ['admins', 'staff'] },
    { uid: 'bob', password: 'bob-pw', groups: ['staff'] },
    { uid: 'carol', password: 'carol-pw' },
    { uid: 'dave', password: 'dave-directory-pw' },
    { uid: 'erin', password: 'erin-pw' },
    { uid: 'frank', password: 'frank-pw' },
  ]);
  echo = await echoUpstream();
  // dave is in the file too: the file decides for him.
  fileUsers = htpasswd({ dave: 'dave-file-pw' });
}, 60_000);

afterAll(async () => {
  await echo?.close();
  await slapd?.destroy();
  fileUsers?.remove();
});

type Ldap = Record<string, unknown>;
const searchMode = (): Ldap => ({
  url: slapd.url,
  searchBase: `ou=people,${slapd.baseDn}`,
  searchFilter: '(uid={user})',
  bindDn: slapd.serviceDn,
  bindPassword: slapd.servicePassword,
  groupsBase: `ou=groups,${slapd.baseDn}`,
  groupsFilter: '(member={dn})',
});
const directMode = (): Ldap => ({ url: slapd.url, userDn: `uid={user},ou=people,${slapd.baseDn}` });

/** A gateway whose users are the directory's (and the htpasswd file's, when `file` is given). */
function gatewayConfig(ldap: Ldap, options: { file?: string; lockout?: Record<string, number> } = {}) {
  return testConfig('', {
    server: { host: '127.0.0.1', port: 0, trustProxy: 1 },
    users: { ...(options.file ? { htpasswd: options.file } : {}), watch: false, ldap },
    lockout: options.lockout ?? {},
    upstreams: { up: { url: echo.url } },
    routes: [
      { path: '/v1/conversations', upstream: 'up' },
      ...(ldap.groupsBase ? [{ path: '/v1/admin', upstream: 'up', allow: { groups: ['admins'] } }] : []),
    ],
  });
}

let nextAddress = 1;
/** A client address of its own (trustProxy 1), so lockout and address throttles of one test do not touch another. */
const freshAddress = () => `198.51.100.${nextAddress++}`;

function get(gw: RunningGateway, path: string, authorization: string, address: string): Promise<Response> {
  return fetch(`${gw.base}${path}`, { headers: { authorization, 'x-forwarded-for': address } });
}

function create(gw: RunningGateway, appKey: string, appSecret: string, address: string): Promise<Response> {
  return postJson(gw.base, '/v1/tokens/create', { appKey, appSecret }, { 'x-forwarded-for': address });
}

async function problemOf(res: Response): Promise<{ status: number; code: string }> {
  const body = (await res.json()) as { code: string };
  return { status: res.status, code: body.code };
}

describe('users from the directory (search with a service bind, groups)', () => {
  let gw: RunningGateway;
  let gw2: RunningGateway;
  let logs: string[];
  beforeAll(async () => {
    logs = [];
    const store = new MemorySessionStore(systemClock);
    gw = await startGateway(gatewayConfig(searchMode(), { file: fileUsers.file, lockout: { maxFailuresPerUser: 3 } }), { store, log: createLogger('info', (l) => logs.push(l)) });
    // Another instance of the same deployment: it has seen no sign-in.
    gw2 = await startGateway(gatewayConfig(searchMode(), { file: fileUsers.file }), { store });
  });
  afterAll(async () => {
    await gw?.close();
    await gw2?.close();
  });

  it('Basic with a directory user reaches the upstream with its directory groups', async () => {
    const address = freshAddress();
    const res = await get(gw, '/v1/conversations', basic('alice', 'alice-pw'), address);
    expect(res.status).toBe(200);
    const seen = echo.received.at(-1)!;
    expect(seen.headers['x-authenticated-user']).toBe('alice');
    expect(seen.headers['x-authenticated-groups']).toBe('admins,staff');
  });

  it('groups from the directory count in allow rules: a member passes, a non-member gets 403', async () => {
    const address = freshAddress();
    expect((await get(gw, '/v1/admin', basic('alice', 'alice-pw'), address)).status).toBe(200);
    const refused = await get(gw, '/v1/admin', basic('bob', 'bob-pw'), address);
    expect(await problemOf(refused)).toEqual({ status: 403, code: 'forbidden' });
    // carol is in no group at all.
    expect((await get(gw, '/v1/admin', basic('carol', 'carol-pw'), address)).status).toBe(403);
  });

  it('token create with a directory user; its access token carries the directory groups on another instance too', async () => {
    const address = freshAddress();
    const aliceRes = await create(gw, 'alice', 'alice-pw', address);
    expect(aliceRes.status).toBe(200);
    const alice = (await aliceRes.json()) as { accessToken: string };
    const bob = (await (await create(gw, 'bob', 'bob-pw', address)).json()) as { accessToken: string };
    // gw2 never saw them sign in: it reads their groups with the service account.
    expect((await get(gw2, '/v1/admin', `Bearer ${alice.accessToken}`, address)).status).toBe(200);
    expect(echo.received.at(-1)!.headers['x-authenticated-groups']).toBe('admins,staff');
    expect((await get(gw2, '/v1/admin', `Bearer ${bob.accessToken}`, address)).status).toBe(403);
    expect((await get(gw2, '/v1/conversations', `Bearer ${bob.accessToken}`, address)).status).toBe(200);
  });

  it('a wrong password is 401 and counts toward the lockout like any password', async () => {
    const address = freshAddress();
    for (let i = 0; i < 3; i++) {
      expect(await problemOf(await get(gw, '/v1/conversations', basic('erin', `wrong-${i}`), address))).toEqual({ status: 401, code: 'invalid_credentials' });
    }
    // Locked for this user from this address: the right password included.
    const locked = await get(gw, '/v1/conversations', basic('erin', 'erin-pw'), address);
    expect(await problemOf(locked)).toEqual({ status: 429, code: 'too_many_attempts' });
    expect(logs.some((l) => l.includes('"event":"lockout"') && l.includes('"user":"erin"'))).toBe(true);
    // From another address the right password works.
    expect((await get(gw, '/v1/conversations', basic('erin', 'erin-pw'), freshAddress())).status).toBe(200);
  });

  it('an unknown user and an empty password are 401', async () => {
    const address = freshAddress();
    expect(await problemOf(await get(gw, '/v1/conversations', basic('nobody', 'x'), address))).toEqual({ status: 401, code: 'invalid_credentials' });
    expect(await problemOf(await create(gw, 'frank', '', freshAddress()))).toEqual({ status: 400, code: 'invalid_request' });
    expect(await problemOf(await get(gw, '/v1/conversations', basic('frank', ''), freshAddress()))).toEqual({ status: 401, code: 'invalid_credentials' });
  });

  it('filter injection in the user name finds nothing: wildcards and closing parentheses are matched literally', async () => {
    for (const name of ['ali*', '*', 'alice)(uid=*', '*)(|(uid=*', 'alice)(|(objectClass=*)', 'al\\2a', 'alice\0']) {
      const res = await get(gw, '/v1/conversations', basic(name, 'alice-pw'), freshAddress());
      expect({ name, ...(await problemOf(res)) }).toEqual({ name, status: 401, code: 'invalid_credentials' });
    }
    // Names no header may carry are refused before the directory is asked.
    expect((await get(gw, '/v1/conversations', basic('alice,bob', 'alice-pw'), freshAddress())).status).toBe(401);
  });

  it('a name in the htpasswd file is verified by the file, never bound in the directory', async () => {
    expect((await get(gw, '/v1/conversations', basic('dave', 'dave-file-pw'), freshAddress())).status).toBe(200);
    expect((await get(gw, '/v1/conversations', basic('dave', 'dave-directory-pw'), freshAddress())).status).toBe(401);
  });

  it('other spellings of a directory name are refused (401): the directory takes names in their canonical spelling only', async () => {
    // The directory matches ALICE and ａlice (fullwidth) as uid=alice: as principals of their own they
    // would be alice with her groups under another name (allow rules, rate limits, lockout).
    for (const name of ['ALICE', 'Alice', 'ａlice', 'ＡＬＩＣＥ']) {
      const res = await get(gw, '/v1/admin', basic(name, 'alice-pw'), freshAddress());
      expect({ name, ...(await problemOf(res)) }).toEqual({ name, status: 401, code: 'invalid_credentials' });
      expect({ name, ...(await problemOf(await create(gw, name, 'alice-pw', freshAddress()))) }).toEqual({ name, status: 401, code: 'invalid_credentials' });
    }
    expect((await get(gw, '/v1/admin', basic('alice', 'alice-pw'), freshAddress())).status).toBe(200);
  });

  it('a spelling of a name in the htpasswd file never reaches the directory: the file decides', async () => {
    for (const name of ['DAVE', 'Dave', 'ｄａｖｅ']) {
      const res = await get(gw, '/v1/conversations', basic(name, 'dave-directory-pw'), freshAddress());
      expect({ name, ...(await problemOf(res)) }).toEqual({ name, status: 401, code: 'invalid_credentials' });
    }
  });

  it('directory down: users verified within cacheSeconds pass, others get 503 directory_unavailable; back up: recovery without restart', async () => {
    const address = freshAddress();
    expect((await get(gw, '/v1/conversations', basic('alice', 'alice-pw'), address)).status).toBe(200);
    const aliceTokens = (await (await create(gw, 'alice', 'alice-pw', address)).json()) as { accessToken: string };
    await slapd.stop();
    try {
      // Cached: Basic, token create and Bearer (groups read before) keep working.
      expect((await get(gw, '/v1/admin', basic('alice', 'alice-pw'), address)).status).toBe(200);
      expect((await create(gw, 'alice', 'alice-pw', address)).status).toBe(200);
      expect((await get(gw, '/v1/admin', `Bearer ${aliceTokens.accessToken}`, address)).status).toBe(200);
      // Not verified before: 503, never a pass and never a 500.
      const other = freshAddress();
      const down = await get(gw, '/v1/conversations', basic('frank', 'frank-pw'), other);
      expect(await problemOf(down)).toEqual({ status: 503, code: 'directory_unavailable' });
      expect(down.headers.get('retry-after')).toBe('5');
      expect(await problemOf(await create(gw, 'frank', 'frank-pw', other))).toEqual({ status: 503, code: 'directory_unavailable' });
      // A wrong password of a cached user cannot be told from a right one either: 503, and no lockout count.
      expect(await problemOf(await get(gw, '/v1/conversations', basic('alice', 'not-alice-pw'), address))).toEqual({ status: 503, code: 'directory_unavailable' });
      // The file's users do not depend on the directory.
      expect((await get(gw, '/v1/conversations', basic('dave', 'dave-file-pw'), other)).status).toBe(200);
      expect(logs.filter((l) => l.includes('the directory cannot answer')).length).toBe(1);
    } finally {
      await slapd.start();
    }
    expect((await get(gw, '/v1/conversations', basic('frank', 'frank-pw'), freshAddress())).status).toBe(200);
    expect((await create(gw, 'frank', 'frank-pw', freshAddress())).status).toBe(200);
    // The service connection (searches, groups) came back too.
    const bobTokens = (await (await create(gw, 'bob', 'bob-pw', freshAddress())).json()) as { accessToken: string };
    expect((await get(gw2, '/v1/conversations', `Bearer ${bobTokens.accessToken}`, freshAddress())).status).toBe(200);
    expect(logs.some((l) => l.includes('the directory answers again'))).toBe(true);
  }, 30_000);
});

describe('names in another spelling', () => {
  it('share the lockout of the canonical name: once alice is locked, ALICE or ａlice with her password do not sign in', async () => {
    const gw = await startGateway(gatewayConfig(searchMode(), { lockout: { maxFailuresPerAccount: 3 } }));
    try {
      for (let i = 0; i < 3; i++) expect((await get(gw, '/v1/conversations', basic('alice', `wrong-${i}`), freshAddress())).status).toBe(401);
      expect(await problemOf(await get(gw, '/v1/conversations', basic('alice', 'alice-pw'), freshAddress()))).toEqual({ status: 429, code: 'too_many_attempts' });
      // Each spelling is refused before its password is tried: no fresh budget of guesses per spelling.
      for (const name of ['Alice', 'ALICE', 'ａlice']) {
        const res = await get(gw, '/v1/conversations', basic(name, 'alice-pw'), freshAddress());
        expect({ name, ...(await problemOf(res)) }).toEqual({ name, status: 401, code: 'invalid_credentials' });
        expect({ name, status: (await create(gw, name, 'alice-pw', freshAddress())).status }).toEqual({ name, status: 401 });
      }
    } finally {
      await gw.close();
    }
  });

  it('are refused without a bind: with the directory unreachable they get 401, the canonical name 503', async () => {
    const gw = await startGateway(gatewayConfig({ ...searchMode(), url: `ldap://127.0.0.1:${await closedPort()}` }, { file: fileUsers.file }));
    try {
      expect(await problemOf(await get(gw, '/v1/conversations', basic('alice', 'alice-pw'), freshAddress()))).toEqual({ status: 503, code: 'directory_unavailable' });
      for (const name of ['ALICE', 'ａlice', 'DAVE', 'ｄａｖｅ']) {
        const res = await get(gw, '/v1/conversations', basic(name, /dave/i.test(name.normalize('NFKC')) ? 'dave-directory-pw' : 'alice-pw'), freshAddress());
        expect({ name, ...(await problemOf(res)) }).toEqual({ name, status: 401, code: 'invalid_credentials' });
      }
      expect((await get(gw, '/v1/conversations', basic('dave', 'dave-file-pw'), freshAddress())).status).toBe(200);
    } finally {
      await gw.close();
    }
  });

  it('count like a wrong password toward their own lockout', async () => {
    const gw = await startGateway(gatewayConfig(searchMode(), { lockout: { maxFailuresPerUser: 2 } }));
    try {
      const address = freshAddress();
      for (let i = 0; i < 2; i++) expect((await get(gw, '/v1/conversations', basic('BOB', 'bob-pw'), address)).status).toBe(401);
      expect(await problemOf(await get(gw, '/v1/conversations', basic('BOB', 'bob-pw'), address))).toEqual({ status: 429, code: 'too_many_attempts' });
    } finally {
      await gw.close();
    }
  });
});

describe('a user removed from the directory', () => {
  it('loses Basic at once (no cache) and its access tokens once its groups are read again', async () => {
    const gw = await startGateway(gatewayConfig({ ...searchMode(), cacheSeconds: 0 }));
    try {
      slapd.add(personLdif('gina', 'gina-pw'));
      const address = freshAddress();
      const tokens = (await (await create(gw, 'gina', 'gina-pw', address)).json()) as { accessToken: string };
      expect((await get(gw, '/v1/conversations', `Bearer ${tokens.accessToken}`, address)).status).toBe(200);
      slapd.remove(personDn('gina'));
      expect((await get(gw, '/v1/conversations', basic('gina', 'gina-pw'), address)).status).toBe(401);
      // The groups read with the sign-in serve for a second at most with cacheSeconds 0; then the entry is read again.
      const deadline = Date.now() + 10_000;
      let last: { status: number; code: string } | undefined;
      while (Date.now() < deadline) {
        const res = await get(gw, '/v1/conversations', `Bearer ${tokens.accessToken}`, address);
        if (res.status === 200) {
          await res.body?.cancel();
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        last = await problemOf(res);
        break;
      }
      expect(last).toEqual({ status: 401, code: 'invalid_token' });
    } finally {
      await gw.close();
    }
  });
});

describe('a search that finds more than one entry', () => {
  it('refuses the name (401), whether the directory answers two entries or more than were asked for', async () => {
    const gw = await startGateway(gatewayConfig({ ...searchMode(), searchFilter: '(&(objectClass=inetOrgPerson)(|(uid={user})(uid=bob)(uid=carol)))' }));
    try {
      // alice, bob and carol: more than the two entries asked for.
      expect(await problemOf(await get(gw, '/v1/conversations', basic('alice', 'alice-pw'), freshAddress()))).toEqual({ status: 401, code: 'invalid_credentials' });
    } finally {
      await gw.close();
    }
    const two = await startGateway(gatewayConfig({ ...searchMode(), searchFilter: '(&(objectClass=inetOrgPerson)(|(uid={user})(uid=bob)))' }));
    try {
      expect(await problemOf(await get(two, '/v1/conversations', basic('alice', 'alice-pw'), freshAddress()))).toEqual({ status: 401, code: 'invalid_credentials' });
      // Only bob matches for bob: one entry, bound as.
      expect((await get(two, '/v1/conversations', basic('bob', 'bob-pw'), freshAddress())).status).toBe(200);
    } finally {
      await two.close();
    }
  });
});

describe('users from the directory (direct bind)', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await startGateway(gatewayConfig(directMode()));
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('binds as uid={user},… and refuses a wrong password', async () => {
    expect((await get(gw, '/v1/conversations', basic('carol', 'carol-pw'), freshAddress())).status).toBe(200);
    expect((await get(gw, '/v1/conversations', basic('carol', 'bob-pw'), freshAddress())).status).toBe(401);
  });

  it('DN injection in the user name binds nothing: the name is one escaped RDN value', async () => {
    // Spaces the directory would ignore (` carol` binds as carol) are refused: one person, one name.
    for (const name of ['carol,ou=people', 'carol+cn=carol', ' carol', 'carol ', 'ca  rol', '#carol', 'carol\\', 'carol;x', '"carol"', '*', 'cn=admin,dc=example,dc=com\0']) {
      const res = await get(gw, '/v1/conversations', basic(name, 'carol-pw'), freshAddress());
      expect({ name, status: res.status }).toEqual({ name, status: 401 });
    }
    // The manager's password with a name that tries to reach its DN.
    expect((await get(gw, '/v1/conversations', basic('x,cn=admin', 'manager-secret'), freshAddress())).status).toBe(401);
  });
});

describe('TLS to the directory', () => {
  const cases: Array<[string, () => Ldap, number]> = [
    ['ldaps with the test CA', () => ({ ...directMode(), url: slapd.ldapsUrl, caFile: slapd.caFile }), 200],
    ['StartTLS with the test CA', () => ({ ...directMode(), startTls: true, caFile: slapd.caFile }), 200],
    ['ldaps with another CA', () => ({ ...directMode(), url: slapd.ldapsUrl, caFile: slapd.otherCaFile }), 503],
    ['StartTLS with another CA', () => ({ ...directMode(), startTls: true, caFile: slapd.otherCaFile }), 503],
  ];
  for (const [name, ldap, status] of cases) {
    it(`${name}: ${status}`, async () => {
      const gw = await startGateway(gatewayConfig(ldap()));
      try {
        const res = await get(gw, '/v1/conversations', basic('carol', 'carol-pw'), freshAddress());
        expect(res.status).toBe(status);
        if (status === 503) expect((await problemOf(res)).code).toBe('directory_unavailable');
      } finally {
        await gw.close();
      }
    });
  }
});

describe('config check --connect', () => {
  it('reports the service bind, an anonymous root DSE read, and each failure', async () => {
    const check = async (ldap: Ldap) => (await checkConnections(gatewayConfig(ldap))).find((r) => r.what.startsWith('directory'))!;
    const service = await check(searchMode());
    expect(service.ok).toBe(true);
    expect(service.detail).toContain(`bound as ${slapd.serviceDn}`);
    const anonymous = await check({ ...directMode(), url: slapd.ldapsUrl, caFile: slapd.caFile });
    expect(anonymous).toMatchObject({ ok: true });
    expect(anonymous.detail).toContain('root DSE over TLS');
    const refused = await check({ ...searchMode(), bindPassword: 'wrong' });
    expect(refused.ok).toBe(false);
    expect(refused.detail).toContain('refused');
    const wrongCa = await check({ ...directMode(), url: slapd.ldapsUrl, caFile: slapd.otherCaFile });
    expect(wrongCa.ok).toBe(false);
    const nothing = await check({ ...directMode(), url: `ldap://127.0.0.1:${await closedPort()}` });
    expect(nothing.ok).toBe(false);
    expect(nothing.detail).toContain('ECONNREFUSED');
  });
});

describe('DirectoryUsers', () => {
  it('refuses an empty password before any bind (an unauthenticated bind would "succeed")', async () => {
    // A directory that cannot be reached: any bind would be a 503, so a plain false means none was tried.
    const users = new DirectoryUsers({ ...directModeConfig(), url: `ldap://127.0.0.1:${await closedPort()}` }, systemClock, silentLogger);
    try {
      expect(await users.verify('carol', '')).toBe(false);
      expect(await users.verify('carol', 'a\0b')).toBe(false);
      expect(await users.verify('', 'x')).toBe(false);
      // Names not in their canonical spelling (the directory would bind them as another name's entry).
      for (const name of ['CAROL', 'Carol', 'ｃarol', 'ｃａｒｏｌ']) expect(await users.verify(name, 'carol-pw')).toBe(false);
      await expect(users.verify('carol', 'carol-pw')).rejects.toMatchObject({ code: 'directory_unavailable', retryAfterSeconds: 5 });
    } finally {
      users.close();
    }
  });
});

describe('UserSources', () => {
  it('gives the directory only canonical names no name of the file spells, the file\'s table as it is now', async () => {
    const directory = new DirectoryUsers({ ...directModeConfig(), url: `ldap://127.0.0.1:${await closedPort()}` }, systemClock, silentLogger);
    const hash = hashSync('x-password', { cost: 4 });
    const file = new PasswordVerifier(new Map([['Dave', hash]]), 0, systemClock);
    const sources = new UserSources(file, directory);
    try {
      expect(sources.inDirectory('erin')).toBe(true);
      // The file's Dave: the directory would bind dave as the same entry's name.
      expect(sources.inDirectory('dave')).toBe(false);
      expect(sources.inDirectory('Dave')).toBe(false);
      // Not canonical: the file's (which does not have it: 401 like any unknown name).
      expect(sources.inDirectory('Erin')).toBe(false);
      expect(sources.inDirectory('ｅrin')).toBe(false);
      expect(await sources.verify('Erin', 'x-password')).toBe(false);
      // The file changes: its spellings are worked out again.
      file.replaceUsers(new Map([['ERIN', hash]]));
      expect(sources.inDirectory('dave')).toBe(true);
      expect(sources.inDirectory('erin')).toBe(false);
    } finally {
      directory.close();
    }
  });
});

function directModeConfig() {
  return {
    url: '', startTls: false, caFile: undefined, userDn: 'uid={user},ou=people,dc=example,dc=com', searchBase: undefined, searchFilter: undefined,
    bindDn: undefined, bindPassword: undefined, groupsBase: undefined, groupsFilter: '(member={dn})', cacheSeconds: 300,
  };
}
