import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/errors.js';

const BCRYPT = /^\$2[aby]\$(0[4-9]|[12]\d|3[01])\$[./A-Za-z0-9]{53}$/;

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
    if (!BCRYPT.test(hash)) {
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

export function readHtpasswd(file: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`users.htpasswd: ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  return parseHtpasswd(text, file);
}
