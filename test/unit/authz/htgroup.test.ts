import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GroupsFile } from '../../../src/authz/groups.js';
import { parseHtgroup } from '../../../src/authz/htgroup.js';
import { ConfigError } from '../../../src/config/errors.js';
import { silentLogger } from '../../../src/log.js';

describe('htgroup file', () => {
  it.each([
    ['one group', 'admins: alice bob\n', { alice: ['admins'], bob: ['admins'] }],
    ['comments, blank lines, tabs, CRLF', '# staff\r\n\r\nadmins:\talice \t bob\r\nops:alice\n', { alice: ['admins', 'ops'], bob: ['admins'] }],
    ['a group on two lines has the members of both', 'ops: alice\nops: bob alice\n', { alice: ['ops'], bob: ['ops'] }],
    ['groups come sorted, whatever the file order', 'zeta: alice\nalpha: alice\n', { alice: ['alpha', 'zeta'] }],
    ['an empty group is fine', 'empty:\n', {}],
  ])('%s', (_name, text, expected) => {
    expect(Object.fromEntries(parseHtgroup(text, 'g'))).toEqual(expected);
  });

  it.each([
    ['no colon', 'admins alice\n'],
    ['no group name', ': alice\n'],
    ['a space in the group name', 'the admins: alice\n'],
  ])('refuses %s, naming the line', (_name, text) => {
    expect(() => parseHtgroup(`ok: bob\n${text}`, 'users.groups')).toThrow(ConfigError);
    try {
      parseHtgroup(`ok: bob\n${text}`, 'users.groups');
    } catch (err) {
      expect((err as ConfigError).problems).toEqual([expect.stringMatching(/^users\.groups:2 /)]);
    }
  });
});

describe('GroupsFile', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reloads when the file is replaced, tells listeners of a change only, and keeps the old groups when the new file is broken', async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-groups-'));
    const file = join(dir, 'users.groups');
    writeFileSync(file, 'admins: alice\n');
    const groups = new GroupsFile(file, silentLogger, true);
    let changes = 0;
    groups.onChange(() => changes++);
    try {
      expect(groups.of('alice')).toEqual(['admins']);
      expect(groups.of('bob')).toEqual([]);
      // Replaced as editors do: a new file renamed over the old one.
      writeFileSync(join(dir, 'next'), 'admins: bob\n');
      renameSync(join(dir, 'next'), file);
      const deadline = Date.now() + 3000;
      while (groups.of('bob').length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(groups.of('bob')).toEqual(['admins']);
      expect(groups.of('alice')).toEqual([]);
      expect(changes).toBe(1);
      expect(groups.reload()).toBe(true);
      expect(changes).toBe(1);
      writeFileSync(file, 'not a group line\n');
      expect(groups.reload()).toBe(false);
      expect(groups.of('bob')).toEqual(['admins']);
    } finally {
      groups.close();
    }
  });

  it('a missing file stops the start, naming the key', () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-groups-'));
    expect(() => new GroupsFile(join(dir, 'nope'), silentLogger, false)).toThrow(/users\.groups: .*nope cannot be read: ENOENT/);
  });
});
