import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { inspectConfigText, parseConfig } from '../../src/config/load.js';

const SECRET = 's'.repeat(40);
const ENV = { JWT_SECRET: SECRET, GATEWAY_LDAP_PASSWORD: 'service-pw' };
const config = (users: string, routes = '[]') => `
users:
${users}
tokens:
  signing: { alg: HS256, secret: "\${JWT_SECRET}" }
upstreams:
  up: { url: "http://127.0.0.1:9001" }
routes: ${routes}
`;

function problems(yaml: string): string[] {
  try {
    parseConfig(yaml, '/etc/gw/gateway.yaml', ENV);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('users.ldap', () => {
  it('reads the issue\'s example with its defaults; htpasswd is optional beside it', () => {
    const c = parseConfig(config(`
  ldap:
    url: ldaps://ldap.example.com:636
    caFile: ldap-ca.pem
    searchBase: ou=people,dc=example,dc=com
    searchFilter: "(uid={user})"
    bindDn: cn=gateway,dc=example,dc=com
    bindPassword: "\${GATEWAY_LDAP_PASSWORD}"
    groupsBase: ou=groups,dc=example,dc=com`, '[{ path: /v1/a, upstream: up, allow: { groups: [admins] } }]'), '/etc/gw/gateway.yaml', ENV);
    expect(c.users.htpasswd).toBe('');
    expect(c.users.ldap).toEqual({
      url: 'ldaps://ldap.example.com:636', startTls: false, caFile: '/etc/gw/ldap-ca.pem', userDn: undefined,
      searchBase: 'ou=people,dc=example,dc=com', searchFilter: '(uid={user})', bindDn: 'cn=gateway,dc=example,dc=com', bindPassword: 'service-pw',
      groupsBase: 'ou=groups,dc=example,dc=com', groupsFilter: '(member={dn})', cacheSeconds: 300,
    });
  });

  it('still requires htpasswd without a directory', () => {
    expect(problems(config('  watch: false'))).toContain('users.htpasswd is required');
  });

  it('refuses what cannot work, naming the key', () => {
    const ldap = (lines: string) => problems(config(`  ldap:\n${lines.split('\n').map((l) => `    ${l}`).join('\n')}`));
    expect(ldap('url: http://x')).toEqual(expect.arrayContaining(['users.ldap.url (line 4, column 5) must be a ldap: or ldaps: URL; found "http://x"']));
    expect(ldap('url: ldap://x')).toEqual(['users.ldap (line 3, column 3) needs userDn (a direct bind) or searchBase with searchFilter (a search for the user\'s entry)']);
    expect(ldap('url: ldap://x\nuserDn: uid=x,dc=y')).toEqual(['users.ldap.userDn (line 5, column 5) must hold {user}, where the user name goes; found "uid=x,dc=y"']);
    expect(ldap('url: ldap://x\nuserDn: "uid={user}"\nsearchBase: dc=y\nsearchFilter: "(uid={user})"')).toEqual(['users.ldap (line 3, column 3) sets userDn and searchBase: set one (a direct bind, or a search for the user\'s entry)']);
    expect(ldap('url: ldap://x\nsearchBase: dc=y')).toEqual(['users.ldap.searchFilter is required with searchBase, e.g. "(uid={user})"']);
    expect(ldap('url: ldap://x\nsearchBase: dc=y\nsearchFilter: "uid={user}"')).toEqual(['users.ldap.searchFilter (line 6, column 5) must be a filter in parentheses, e.g. "(uid={user})"; found "uid={user}"']);
    expect(ldap('url: ldaps://x\nstartTls: true\nuserDn: "uid={user}"')).toEqual(['users.ldap.startTls (line 5, column 5) is for ldap:// URLs (ldaps:// is TLS from the first byte)']);
    expect(ldap('url: ldap://x\ncaFile: ca.pem\nuserDn: "uid={user}"')).toEqual(['users.ldap.caFile (line 5, column 5) is set, but the connection is plain: use an ldaps:// URL or startTls: true']);
    expect(ldap('url: ldap://x\nuserDn: "uid={user}"\nbindDn: cn=gw')).toEqual(['users.ldap.bindPassword is required with bindDn']);
    expect(ldap('url: ldap://x\nuserDn: "uid={user}"\ngroupsBase: dc=y\ngroupsFilter: "(objectClass=groupOfNames)"')).toEqual(['users.ldap.groupsFilter (line 7, column 5) must hold {dn} or {user}, or every user would get the same groups; found "(objectClass=groupOfNames)"']);
    expect(ldap('url: ldap://x\nuserDn: "uid={user}"\ncacheSeconds: -1')).toEqual(['users.ldap.cacheSeconds (line 6, column 5) must be a non-negative integer; found -1']);
    expect(ldap('url: ldap://x\nuserDn: "uid={user}"\nbindDN: cn=gw')).toEqual(['users.ldap.bindDN (line 6, column 5) is not a known setting; did you mean bindDn?']);
  });

  it('allow rules may name groups with groupsBase; without bindDn that is a warning', () => {
    const text = config('  ldap: { url: "ldap://x", userDn: "uid={user}", groupsBase: "dc=g" }', '[{ path: /v1/a, upstream: up, allow: { groups: [admins] } }]');
    const { problems: p, warnings } = inspectConfigText(text, '/etc/gw/gateway.yaml', ENV);
    expect(p).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/^users\.ldap\.groupsBase is set without bindDn/)]);
  });
});
