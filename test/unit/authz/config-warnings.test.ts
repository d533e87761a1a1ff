import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectConfig } from '../../../src/inspect.js';

/**
 * `config check` on allow rules that pass the schema but cannot mean what they say: a method no request
 * can have (refused), a method in lower case, a user or group in neither file, a guarded route under an
 * unguarded prefix route (warnings); each naming its key and the line of the file it was written on.
 */

const ENV = { JWT_SECRET: 's'.repeat(40) };
let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gw-warn-'));
  // alice and bob (hashes are not read by config check beyond the format), groups admins and staff.
  writeFileSync(join(dir, 'users.htpasswd'), 'alice:$2y$04$abcdefghijklmnopqrstuuJ3Jt0Hrfr4bF.1UyiHzUKGyJ1v6Rk2i\nbob:$2y$04$abcdefghijklmnopqrstuuJ3Jt0Hrfr4bF.1UyiHzUKGyJ1v6Rk2i\n');
  writeFileSync(join(dir, 'users.groups'), 'admins: alice\nstaff: alice bob\n');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function inspect(routes: string): { problems: string[]; warnings: string[] } {
  const file = join(dir, `gateway-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, [
    'users: { htpasswd: users.htpasswd, groups: users.groups }',
    'tokens:',
    '  signing: { alg: HS256, secret: "${JWT_SECRET}" }',
    'upstreams:',
    '  up: { url: "http://127.0.0.1:9001" }',
    'routes:',
    routes,
    '',
  ].join('\n'));
  const { problems, warnings } = inspectConfig(file, ENV);
  return { problems, warnings };
}

describe('allow rules that cannot mean what they say', () => {
  it('refuses a method no request can have, naming the line, with the nearest method', () => {
    const r = inspect([
      '  - path: /v1/reports',
      '    upstream: up',
      '    allow:',
      '      users: [alice]',
      '      methods: [GET, FETCH, PACH]',
    ].join('\n'));
    expect(r.problems).toEqual([
      'routes[0].allow.methods[1] (line 11, column 22) is FETCH, which is not an HTTP method the gateway can receive: no request would ever match it',
      'routes[0].allow.methods[2] (line 11, column 29) is PACH, which is not an HTTP method the gateway can receive: no request would ever match it; did you mean PATCH?',
    ]);
  });

  it('warns about a method in lower case (read as upper case), naming the line', () => {
    const r = inspect([
      '  - path: /v1/reports',
      '    upstream: up',
      '    allow:',
      '      users: [alice]',
      '      methods:',
      '        - GET',
      '        - head',
    ].join('\n'));
    expect(r.problems).toEqual([]);
    expect(r.warnings).toEqual(['routes[0].allow.methods[1] (line 13) is head: methods are upper case; read as HEAD (write HEAD)']);
  });

  it('warns about a user not in the users file and a group no one is in, naming route and line', () => {
    const r = inspect([
      '  - { path: /v1/reports, upstream: up, allow: { users: [alice, alcie], groups: [staff] } }',
      '  - path: /v1/admin',
      '    upstream: up',
      '    allow: { groups: [admin, nobody] }',
    ].join('\n'));
    expect(r.problems).toEqual([]);
    expect(r.warnings).toEqual([
      'routes[0].allow.users[1] (line 7) is "alcie", who is not in the users file (users.htpasswd): this entry lets no one into /v1/reports; did you mean alice?',
      'routes[1].allow.groups[0] (line 10) is "admin", a group with no members in the groups file (users.groups): this entry lets no one into /v1/admin; did you mean admins?',
      'routes[1].allow.groups[1] (line 10) is "nobody", a group with no members in the groups file (users.groups): this entry lets no one into /v1/admin',
    ]);
  });

  it('warns about a guarded route under an unguarded prefix route, and not when the prefix is guarded too', () => {
    const r = inspect([
      '  - { path: /api, upstream: up }',
      '  - { path: /api/admin, upstream: up, allow: { groups: [admins] } }',
      '  - { path: /api/admin/audit, upstream: up, allow: { users: [alice] } }',
      '  - { path: /apix, upstream: up, allow: { users: [alice] } }',
    ].join('\n'));
    expect(r.problems).toEqual([]);
    expect(r.warnings).toEqual([
      'routes[1].path (line 8) /api/admin has allow rules, but routes[0].path (line 7) /api, above it, has none: a spelling of /api/admin that its upstream '
        + 'treats as the same path (another case, an encoded or doubled character) may reach the route /api without them; give /api allow rules too, '
        + 'or make sure its upstream does not serve /api/admin',
    ]);
  });

  it('says nothing about rules that are fine', () => {
    const r = inspect([
      '  - { path: /api, upstream: up, allow: { groups: [staff] } }',
      '  - { path: /api/admin, upstream: up, allow: { users: [bob], groups: [admins], methods: [GET, HEAD, DELETE] } }',
    ].join('\n'));
    expect(r).toEqual({ problems: [], warnings: [] });
  });
});
