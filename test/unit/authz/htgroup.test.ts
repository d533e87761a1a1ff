import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GroupsFile } from '../../../src/authz/groups.js';
import { parseHtgroup } from '../../../src/authz/htgroup.js';
import { ConfigError } from '../../../src/config/config-error.js';
import { inspectConfig } from '../../../src/inspect.js';
import { createLogger, silentLogger } from '../../../src/log.js';

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
    ['two lines run together (a member holding ":")', 'admins: alice staff: bob\n'],
    ['a member holding ":"', 'admins: alice bob:x\n'],
    ['a comment after the members (a member holding "#")', 'admins: alice # and bob\n'],
    ['a member holding "#"', 'admins: alice#bob\n'],
  ])('refuses %s, naming the line', (_name, text) => {
    expect(() => parseHtgroup(`ok: bob\n${text}`, 'users.groups')).toThrow(ConfigError);
    try {
      parseHtgroup(`ok: bob\n${text}`, 'users.groups');
    } catch (err) {
      expect((err as ConfigError).problems).toEqual([expect.stringMatching(/^users\.groups:2[: ]/)]);
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
      // Two lines run together would make bob a staff member and `staff:` an admin: refused the same way.
      writeFileSync(file, 'admins: alice staff: bob\n');
      expect(groups.reload()).toBe(false);
      expect(groups.of('bob')).toEqual(['admins']);
      expect(groups.of('alice')).toEqual([]);
    } finally {
      groups.close();
    }
  });

  it('a missing file stops the start, naming the key', () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-groups-'));
    expect(() => new GroupsFile(join(dir, 'nope'), silentLogger, false)).toThrow(/users\.groups: .*nope cannot be read: ENOENT/);
  });
});

describe('GroupsFile reload refusal', () => {
  it('logs a refused reload with the line and keeps the groups in force, as the users file does', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-groups-'));
    const file = join(dir, 'users.groups');
    const lines: string[] = [];
    try {
      writeFileSync(file, 'admins: alice\n');
      const groups = new GroupsFile(file, createLogger('info', (line) => lines.push(line)), false);
      writeFileSync(file, '# staff\nadmins: alice staff: bob\n');
      expect(groups.reload()).toBe(false);
      expect(groups.of('bob')).toEqual([]);
      expect(groups.of('alice')).toEqual(['admins']);
      const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(logged).toEqual([expect.objectContaining({ level: 'error', msg: 'groups file not reloaded; keeping the previous groups', error: expect.stringContaining(`${file}:2: the member "staff:" holds ":"`) })]);
      expect(logged.some((l) => l.msg === 'groups reloaded')).toBe(false);
      groups.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('config check of the groups file', () => {
  it('names the line of a member holding ":" among the configuration\'s problems', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-groups-'));
    try {
      writeFileSync(join(dir, 'users.groups'), 'ops: carol\nadmins: alice staff: bob\n');
      writeFileSync(join(dir, 'gateway.yaml'), 'users: { htpasswd: users.htpasswd, groups: users.groups }\n');
      const { problems } = inspectConfig(join(dir, 'gateway.yaml'), {});
      expect(problems).toContainEqual(`${join(dir, 'users.groups')}:2: the member "staff:" holds ":"; members are user names separated by spaces, one group per line`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
