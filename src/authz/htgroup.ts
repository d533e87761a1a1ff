import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/config-error.js';
import type { FileCheck } from '../config/inspection.js';

/** Each user's groups, sorted (the form every later step reads: claims, headers, cache keys). */
export type GroupTable = ReadonlyMap<string, readonly string[]>;

const GROUP = /^[^\s:#]+$/;
const MEMBER_NOT = /[:#]/;

/**
 * Parses an Apache htgroup file: `group: user1 user2` lines (members separated by spaces or tabs),
 * `#` comments and blank lines. A group on several lines has the members of all of them (as Apache
 * reads it). Anything else is refused, naming its line, and the whole file with it: a member holding `:` or
 * `#` too (two lines run together, a comment after the members).
 */
export function parseHtgroup(text: string, file: string): GroupTable {
  const members = new Map<string, Set<string>>();
  const problems: string[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${file}:${i + 1}`;
    const colon = line.indexOf(':');
    const group = colon < 0 ? '' : line.slice(0, colon).trim();
    if (!GROUP.test(group)) {
      problems.push(`${where} is not a "group: user1 user2" line`);
      return;
    }
    const users = line.slice(colon + 1).split(/[ \t]+/).filter((user) => user !== '');
    // `admins: alice staff: bob` is two lines run together, not a member named `staff:`, and a `#` after
    // the members starts no comment (Apache reads its words as members too). No user name holds `:` or
    // `#` (htpasswd splits at the first colon; a line starting with `#` is a comment): refuse the file.
    const odd = users.find((user) => MEMBER_NOT.test(user));
    if (odd !== undefined) {
      problems.push(`${where}: the member ${JSON.stringify(odd)} holds "${MEMBER_NOT.exec(odd)![0]}"; members are user names separated by spaces, one group per line`);
      return;
    }
    for (const user of users) {
      let groups = members.get(user);
      if (!groups) members.set(user, (groups = new Set()));
      groups.add(group);
    }
  });
  if (problems.length > 0) throw new ConfigError(problems);
  const table = new Map<string, readonly string[]>();
  for (const [user, groups] of members) table.set(user, Object.freeze([...groups].sort()));
  return table;
}

export function readHtgroup(file: string): GroupTable {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`users.groups: ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  return parseHtgroup(text, file);
}

/** The groups file, at load time: its groups. */
export const htgroupCheck: FileCheck = {
  keys: ['users.groups'],
  applies: (config) => Boolean(config.users.groups),
  run: (config) => ({ groups: readHtgroup(config.users.groups!) }),
};
