import { describe, expect, it } from 'vitest';
import { escapeDnValue, escapeFilterValue, fill } from '../../src/credentials/ldap-escape.js';

describe('escapeDnValue (RFC 4514)', () => {
  it.each([
    ['alice', 'alice'],
    ['a,b', 'a\\,b'],
    ['a+b', 'a\\+b'],
    ['a=b', 'a\\=b'],
    ['"q"', '\\"q\\"'],
    ['a;b<c>d', 'a\\;b\\<c\\>d'],
    ['back\\slash', 'back\\\\slash'],
    ['#lead', '\\#lead'],
    ['mid#dle', 'mid#dle'],
    [' lead', '\\ lead'],
    ['trail ', 'trail\\ '],
    ['in side', 'in side'],
    ['nul\0', 'nul\\00'],
    ['tab\t', 'tab\\09'],
    ['x,cn=admin,dc=example,dc=com', 'x\\,cn\\=admin\\,dc\\=example\\,dc\\=com'],
  ])('%j -> %j', (value, escaped) => {
    expect(escapeDnValue(value)).toBe(escaped);
  });
});

describe('escapeFilterValue (RFC 4515)', () => {
  it.each([
    ['alice', 'alice'],
    ['*', '\\2a'],
    [')(uid=*', '\\29\\28uid=\\2a'],
    ['a\\b', 'a\\5cb'],
    ['nul\0', 'nul\\00'],
    ['uid=a\\,b,ou=people', 'uid=a\\5c,b,ou=people'],
  ])('%j -> %j', (value, escaped) => {
    expect(escapeFilterValue(value)).toBe(escaped);
  });
});

describe('fill', () => {
  it('replaces each placeholder once, never inside a value put in', () => {
    expect(fill('(&(member={dn})(cn={user}))', { dn: '{user}', user: 'x' })).toBe('(&(member={user})(cn=x))');
    expect(fill('uid={user},ou=p', { user: 'a' })).toBe('uid=a,ou=p');
    expect(fill('{unknown}', {})).toBe('{unknown}');
  });
});
