import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/errors.js';

/** Each user's groups, sorted (the form every later step reads: claims, headers, cache keys). */
export type GroupTable = ReadonlyMap<string, readonly string[]>;

const GROUP = /^[^\s:#]+$/;

/**
 * Parses an Apache htgroup file: `group: user1 user2` lines (members separated by spaces or tabs),
 * `#` comments and blank lines. A group on several lines has the members of all of them (as Apache
 * reads it). Anything else is refused, naming its line, and the whole file with it.
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
    for (const user of line.slice(colon + 1).split(/[ \t]+/)) {
      if (user === '') continue;
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
