import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashSync } from '../../src/credentials/bcrypt.js';

// `npm test` builds first (pretest); the CLI is tested as users run it.
const CLI = join(import.meta.dirname, '../../dist/src/main.js');
const dir = mkdtempSync(join(tmpdir(), 'gw-names-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('config check and unsafe user names', () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build (npm test does it first)`);

  it('fails on a user name with a list separator or a control character, naming each line', () => {
    const hash = hashSync('pw', { cost: 4 });
    writeFileSync(join(dir, 'users.htpasswd'), `alice:${hash}\neve,admin:${hash}\nmallory\u2028x:${hash}\n`);
    writeFileSync(join(dir, 'gateway.yaml'), [
      'users: { htpasswd: users.htpasswd }',
      'tokens: { signing: { alg: HS256, secret: "' + 'x'.repeat(48) + '" } }',
      'upstreams: { up: { url: "http://127.0.0.1:1" } }',
      'routes: [ { path: /v1, upstream: up } ]',
    ].join('\n') + '\n');
    const r = spawnSync(process.execPath, [CLI, 'config', 'check', '--config', join(dir, 'gateway.yaml')], { env: { PATH: process.env.PATH }, encoding: 'utf8', timeout: 10_000 });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('users.htpasswd:2');
    expect(r.stderr).toContain('users.htpasswd:3');
    expect(r.stderr).toContain('U+2028');
  });
});
