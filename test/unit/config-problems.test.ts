import { describe, expect, it } from 'vitest';
import { shown } from '../../src/config/checker.js';
import { inspectConfigText } from '../../src/config/load.js';

// What `config check` says about an unknown key or a bad value: where the file has the key (line and
// column, as a YAML syntax error is told), and the value it found, never a secret's.

const SECRET = 's'.repeat(40);
const BASE = [
  'users: { htpasswd: users.htpasswd }',
  'tokens:',
  `  signing: { alg: HS256, secret: "${SECRET}" }`,
  'upstreams:',
  '  api: { url: "http://127.0.0.1:9001" }',
  'routes:',
  '  - { path: /v1/a, upstream: api }',
  '',
].join('\n');
const problems = (yaml: string, env: NodeJS.ProcessEnv = {}) => inspectConfigText(yaml, '/etc/gw/gateway.yaml', env).problems;

describe('a configuration problem names where the file has its key', () => {
  it('an unknown key: its line and column, at any depth', () => {
    expect(problems(`${BASE}server:\n  port: 8080\n  prot: 8081\n`)).toEqual([
      'server.prot (line 10, column 3) is not a known setting; did you mean port?',
    ]);
    expect(problems(`${BASE}colour: blue\n`)).toEqual(['colour (line 8, column 1) is not a known setting']);
    expect(problems(BASE.replace('{ path: /v1/a, upstream: api }', '{ path: /v1/a, upstream: api, upstreem: x }'))).toEqual([
      'routes[0].upstreem (line 7, column 35) is not a known setting; did you mean upstream?',
    ]);
  });

  it('a bad value: the line and column of its key, and the value found', () => {
    expect(problems(`${BASE}server:\n  port: 99999\n  trustProxy: maybe\n`)).toEqual([
      'server.port (line 9, column 3) must be a non-negative integer no greater than 65535; found 99999',
      'server.trustProxy (line 10, column 3) must be a non-negative integer no greater than 32; found "maybe"',
    ]);
    expect(problems(`${BASE}store: { kind: postgres }\n`)).toEqual(['store.kind (line 8, column 10) must be one of memory, redis; found "postgres"']);
    expect(problems(`${BASE}log: { level: [debug] }\n`)).toEqual(['log.level (line 8, column 8) must be one of debug, info, warn, error, silent; found a list']);
    expect(problems(BASE.replace('path: /v1/a', 'path: v1/a'))).toEqual([
      'routes[0].path (line 7, column 7) must be an absolute path of plain segments without a trailing slash, e.g. /v1/conversations; found "v1/a"',
    ]);
  });

  it('a long value is shortened; control characters are escaped', () => {
    const long = `/v1/${'x'.repeat(100)}/`;
    expect(problems(BASE.replace('path: /v1/a', `path: "${long}"`))[0]).toMatch(/; found "\/v1\/x{36}…"$/);
    expect(problems(`${BASE}store: { kind: "redis\\n" }\n`)).toEqual(['store.kind (line 8, column 10) must be one of memory, redis; found "redis\\n"']);
  });

  it('never prints a secret: the value under a key such as secret, password or token is (hidden)', () => {
    expect(problems(BASE.replace(`secret: "${SECRET}"`, 'secret: "short-but-real"'))).toEqual([
      'tokens.signing.secret (line 3, column 26) must be at least 32 bytes long; found (hidden)',
    ]);
    expect(problems(`${BASE}admin: { apiToken: 12345 }\n`)).toEqual(['admin.apiToken (line 8, column 10) must be a string; found (hidden)']);
    expect(problems(`${BASE}store: { kind: redis, url: "http://user:hunter2hunter2@redis:6379" }\n`)).toEqual([
      'store.url (line 8, column 23) must be a redis: or rediss: URL; found "http://(hidden)@redis:6379"',
    ]);
    expect(shown('users.ldap.bindPassword', 'hunter2')).toBe('(hidden)');
    expect(shown('login.clientSecret', 'hunter2')).toBe('(hidden)');
    expect(shown('tokens.verificationKeys[1].secret', 42)).toBe('(hidden)');
    expect(shown('store.sentinel.password', 'hunter2')).toBe('(hidden)');
    expect(shown('store.cluster.nodes[0]', 'http://hunter2@10.0.0.1:6379')).toBe('"http://(hidden)@10.0.0.1:6379"');
  });

  it('a key the environment set is named by its variable, not by a line of the file', () => {
    expect(problems(`${BASE}server: { port: 8080 }\n`, { PORT: 'eighty' })).toEqual([
      'server.port (set by PORT) must be a non-negative integer no greater than 65535; found "eighty"',
    ]);
  });

  it('a required key the file leaves out names no line', () => {
    expect(problems(BASE.replace('users: { htpasswd: users.htpasswd }', 'users: {}'))).toEqual(['users.htpasswd is required']);
  });
});
