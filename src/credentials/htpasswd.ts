import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/config-error.js';
import type { FileCheck } from '../config/inspection.js';

const BCRYPT = /^\$2[aby]\$(0[4-9]|[12]\d|3[01])\$[./A-Za-z0-9]{53}$/;
/**
 * What a user name may not hold: control characters (C0, DEL, C1), Unicode line and paragraph
 * separators, invisible formatting and direction marks, and `,`, which separates the entries of a header
 * list: `eve,admin` in X-Authenticated-User reads as two users to an upstream that splits lists. A user
 * name travels in headers and log lines; such a name is refused at load rather than encoded there.
 */
// eslint-disable-next-line no-control-regex
export const UNSAFE_NAME = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff,]/u;

/**
 * Parses an htpasswd file: `user:hash` lines, `#` comments and blank lines. Only bcrypt entries
 * ($2a$, $2b$, $2y$) are accepted; any other scheme (MD5 $apr1$, SHA1 {SHA}, crypt, plain) is refused,
 * naming its line, because those hashes are cheap to brute-force.
 */
export function parseHtpasswd(text: string, file: string): Map<string, string> {
  const users = new Map<string, string>();
  const problems: string[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${file}:${i + 1}`;
    const colon = line.indexOf(':');
    if (colon <= 0) {
      problems.push(`${where} is not a user:hash line`);
      return;
    }
    const user = line.slice(0, colon);
    const hash = line.slice(colon + 1);
    const unsafe = UNSAFE_NAME.exec(user);
    if (unsafe) {
      problems.push(`${where}: the user name ${JSON.stringify(user)} holds ${describe(unsafe[0])}; user names may not hold control characters, line separators, invisible marks or ","`);
    } else if (!BCRYPT.test(hash)) {
      problems.push(`${where} (user "${user}") is not a bcrypt hash ($2a$/$2b$/$2y$); create it with: htpasswd -B -C 10 ${file} ${user}`);
    } else if (users.has(user)) {
      problems.push(`${where} repeats user "${user}"`);
    } else {
      users.set(user, hash);
    }
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return users;
}

function describe(ch: string): string {
  return ch === ',' ? '","' : `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

export function readHtpasswd(file: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`users.htpasswd: ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  return parseHtpasswd(text, file);
}

/** The users file, at load time (config check, a start): its user names. */
export const htpasswdCheck: FileCheck = {
  keys: ['users.htpasswd'],
  applies: (config) => Boolean(config.users.htpasswd),
  run: (config) => ({ users: new Set(readHtpasswd(config.users.htpasswd).keys()) }),
};
