import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { parseHtpasswd } from '../../src/credentials/htpasswd.js';

const HASH = '$2b$04$' + 'a'.repeat(53);

function problemsOf(text: string): string[] {
  try {
    parseHtpasswd(text, 'users.htpasswd');
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('htpasswd user names', () => {
  // A user name travels in X-Authenticated-User and in log lines: none of these may be in one.
  it.each([
    ['a list separator', 'eve,admin', '","'],
    ['CR', 'eve\radmin', 'U+000D'],
    ['TAB', 'eve\tadmin', 'U+0009'],
    ['NUL', 'eve\0admin', 'U+0000'],
    ['DEL', 'eve\x7fadmin', 'U+007F'],
    ['a C1 control', 'eve\u0085admin', 'U+0085'],
    ['U+2028', 'eve\u2028admin', 'U+2028'],
    ['U+2029', 'eve\u2029admin', 'U+2029'],
    ['a right-to-left override', 'eve\u202eadmin', 'U+202E'],
    ['a zero-width space', 'eve\u200badmin', 'U+200B'],
  ])('refuses a name with %s, naming the line', (_what, name, shown) => {
    const problems = problemsOf(`alice:${HASH}\n# a comment\n${name}:${HASH}\n`);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('users.htpasswd:3');
    expect(problems[0]).toContain(shown);
  });

  it('accepts ordinary names, UTF-8 letters and spaces included', () => {
    expect(problemsOf(`alice:${HASH}\nJosé Núñez:${HASH}\nbob.smith@example.com:${HASH}\n`)).toEqual([]);
  });
});
