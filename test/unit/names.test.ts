import { describe, expect, it } from 'vitest';
import { groupsOf } from '../../src/auth/oidc.js';
import { headerSafe, isGroupName, isUsableName } from '../../src/core/headers.js';

describe('names from credentials (token claims, certificate fields)', () => {
  it('a lone surrogate never makes a header value throw: it is carried as U+FFFD', () => {
    expect(() => headerSafe('ok\ud800')).not.toThrow();
    expect(headerSafe('ok\ud800')).toBe('ok%EF%BF%BD');
    expect(headerSafe('\udc00x')).toBe('%EF%BF%BDx');
    expect(headerSafe('zoë 😀')).toBe(encodeURIComponent('zoë 😀'));
    expect(headerSafe('alice')).toBe('alice');
  });

  it('group names: no comma (the groups header is comma-separated), no control character, no lone surrogate', () => {
    for (const good of ['ops', 'Domain Users', 'zoë', 'a'.repeat(256)]) expect(isGroupName(good), good).toBe(true);
    for (const bad of ['', 'staff,admins', 'ops\n', 'x\u0000', 'a\ud800', 'a'.repeat(257), 7, undefined]) expect(isGroupName(bad), String(bad)).toBe(false);
    // The same test twice in a row (a global regular expression would keep state between calls).
    expect([isGroupName('a\ud800'), isGroupName('a\ud800')]).toEqual([false, false]);
  });

  it('a provider token\'s groups claim keeps only usable group names', () => {
    expect(groupsOf({ roles: ['ops', 'staff,admins', 'dev\u0007', 'x\udfff', 42, 'dev'] }, 'roles')).toEqual(['ops', 'dev']);
  });

  it('user names: control characters and lone surrogates are refused', () => {
    expect(isUsableName('alice@example.com')).toBe(true);
    expect(isUsableName('al\u0000ice')).toBe(false);
    expect(isUsableName('al\ud800ice')).toBe(false);
  });
});
