import type { Checker } from './checker.js';
import { childrenOf } from './defaults.js';
import { readScalars } from './sections.js';
import type { LdapConfig } from './types.js';

/**
 * `users.ldap` (docs/user-sources.md): absent, null or false for none. Exactly one way to find the user's
 * DN (`userDn` with `{user}`, or `searchBase` with a `searchFilter` holding `{user}`); `bindDn` and
 * `bindPassword` together; StartTLS only on `ldap://`.
 */
export function readLdap(c: Checker, raw: unknown, at: (p: string) => string): LdapConfig | undefined {
  if (raw === undefined || raw === null || raw === false) return undefined;
  const key = 'users.ldap';
  const l = c.obj(key, raw);
  c.unknownKeys(key, l, childrenOf(key));
  const url = c.url(`${key}.url`, l.url, ['ldap:', 'ldaps:']);
  const plain = readScalars(c, key, l, { at });
  const { startTls, caFile, userDn, searchBase, searchFilter, bindDn, bindPassword, groupsBase, groupsFilter } = plain;
  if (startTls && url.startsWith('ldaps:')) c.problem(`${key}.startTls`, 'is for ldap:// URLs (ldaps:// is TLS from the first byte)');
  if (caFile && url.startsWith('ldap:') && !startTls) c.problem(`${key}.caFile`, 'is set, but the connection is plain: use an ldaps:// URL or startTls: true');
  if (userDn && searchBase) c.problem(key, 'sets userDn and searchBase: set one (a direct bind, or a search for the user\'s entry)');
  else if (!userDn && !searchBase) c.problem(key, 'needs userDn (a direct bind) or searchBase with searchFilter (a search for the user\'s entry)');
  if (userDn && !userDn.includes('{user}')) c.problem(`${key}.userDn`, 'must hold {user}, where the user name goes');
  if (searchBase && !searchFilter) c.problem(`${key}.searchFilter`, 'is required with searchBase, e.g. "(uid={user})"');
  if (searchFilter && !searchBase) c.problem(`${key}.searchFilter`, 'is set without searchBase');
  if (searchFilter && !searchFilter.includes('{user}')) c.problem(`${key}.searchFilter`, 'must hold {user}, where the user name goes');
  if (searchFilter && !/^\(.*\)$/s.test(searchFilter)) c.problem(`${key}.searchFilter`, 'must be a filter in parentheses, e.g. "(uid={user})"');
  if (bindDn && !bindPassword) c.problem(`${key}.bindPassword`, 'is required with bindDn');
  if (bindPassword && !bindDn) c.problem(`${key}.bindDn`, 'is required with bindPassword');
  if (!/^\(.*\)$/s.test(groupsFilter)) c.problem(`${key}.groupsFilter`, 'must be a filter in parentheses, e.g. "(member={dn})"');
  else if (!groupsFilter.includes('{dn}') && !groupsFilter.includes('{user}')) c.problem(`${key}.groupsFilter`, 'must hold {dn} or {user}, or every user would get the same groups');
  if (groupsBase && !bindDn) {
    c.warning(`${key}.groupsBase`, 'is set without bindDn: groups are searched on the user\'s own bind at sign-in, so a Bearer request on an instance that has not seen that sign-in (or after cacheSeconds) gets no directory groups; set bindDn');
  }
  return { url, ...plain };
}
