import type { ReadStream } from 'node:tty';
import { ConfigError } from '../config/config-error.js';
import type { Config } from '../config/types.js';
import { hash } from '../credentials/bcrypt.js';
import { readHtpasswd } from '../credentials/htpasswd.js';
import { otherSpellings } from '../credentials/user-sources.js';
import { acceptablePassword } from '../credentials/password-verifier.js';
import { silentLogger } from '../log.js';
import { listOf } from '../stores/tables/api-key-spec.js';
import { createStore, createTable } from '../stores/kinds.js';
import { StoreUsers, type StoreUser } from '../stores/tables/store-users.js';
import { InputError, PasswordRefusedError, StoreUnreachableError, UsageError } from './command-errors.js';
import { readHidden } from './prompt.js';

type Options = Partial<Record<string, string | boolean>>;

const MIN_PASSWORD_CHARACTERS = 8;
const DEFAULT_COST = 10;
// eslint-disable-next-line no-control-regex
const UNSAFE_NAME = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff,:\s]/u;

/** `users add|passwd|remove|groups|list|import` against the users kept in the shared store. */
export async function storeUsersCommand(command: string, args: string[], options: Options, config: Config): Promise<string> {
  if (!config.users.store) {
    throw new ConfigError([`${config.file || 'the configuration'}: users.store is not true; the gateway would not read users from the store (set users.store: true)`]);
  }
  const name = args[0];
  const cost = costOf(options.cost, command);
  const inFile = () => (config.users.htpasswd ? readHtpasswd(config.users.htpasswd) : new Map<string, string>());
  const checkName = (n: string) => {
    if (n === '' || n.length > 128 || UNSAFE_NAME.test(n)) throw new UsageError(`"${n}" is not a user name (1 to 128 characters, without spaces, ":", "," or control characters)`, command);
    const file = inFile();
    if (file.has(n)) throw new InputError('users-file name', `user "${n}" is in the users file (${config.users.htpasswd}); a name may be in only one source: nothing was changed`);
    const spelling = otherSpellings(file.keys())(n);
    if (spelling !== undefined) throw new InputError('users-file name', `user "${n}" differs from "${spelling}" of the users file (${config.users.htpasswd}) only by case; a name may be in only one source, whatever its case: nothing was changed`);
  };
  switch (command) {
    case 'users add': {
      checkName(name!);
      const groups = groupsOption(options.groups);
      const hashed = await hash(await readPassword(name!), { cost });
      const added = await withUsers(config, (users) => users.add(name!, hashed, groups));
      if (!added) throw new InputError('user exists', `user "${name}" is already in the store (users passwd changes the password); nothing was changed`);
      return `added user "${name}"${groups.length > 0 ? ` in groups ${groups.join(', ')}` : ''}; every instance accepts it now`;
    }
    case 'users passwd': {
      const hashed = await hash(await readPassword(name!), { cost });
      // Every instance ends the user's sessions when it hears the change; the command does too, so that
      // they have ended on every instance when it answers (whichever comes first, the other finds none).
      const done = await withUsers(config, async (users, endSessions) => (await users.passwd(name!, hashed)) && (await endSessions(name!), true));
      if (!done) throw noSuchUser(name!);
      return `changed the password of "${name}"; its sessions ended on every instance`;
    }
    case 'users remove': {
      // Its sessions end whether or not it was there: a retry after a failure finishes the job.
      const done = await withUsers(config, async (users, endSessions) => {
        const removed = await users.remove(name!);
        await endSessions(name!);
        return removed;
      });
      if (!done) throw noSuchUser(name!);
      return `removed user "${name}"; its sessions ended on every instance`;
    }
    case 'users groups': {
      if (typeof options.set !== 'string') throw new UsageError('users groups needs --set A,B (an empty --set "" removes every group)', command);
      const groups = groupsOption(options.set);
      const done = await withUsers(config, (users) => users.setGroups(name!, groups));
      if (!done) throw noSuchUser(name!);
      return `user "${name}" is now in ${groups.length > 0 ? `groups ${groups.join(', ')}` : 'no group'}`;
    }
    case 'users list': {
      const list = await withUsers(config, (users) => users.list());
      if (list.length === 0) return 'no users in the store';
      const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
      const width = Math.max(4, ...list.map((u) => u.name.length));
      return ['name'.padEnd(width) + '  groups  changed', ...list.map((u) => `${u.name.padEnd(width)}  ${u.groups.join(',') || '-'}  ${iso(u.changedAtMs)}`)].join('\n');
    }
    case 'users import': {
      const lines = readImported(name!);
      const file = inFile();
      const spelling = otherSpellings(file.keys());
      const clash = [...lines.keys()].filter((n) => file.has(n) || spelling(n) !== undefined);
      if (clash.length > 0) throw new InputError('users-file name', `${clash.map((n) => `"${n}"`).join(', ')} in ${name} ${clash.length === 1 ? 'is' : 'are'} also in the users file (${config.users.htpasswd}), or differ from a name of it only by case: nothing was imported`);
      const { added, skipped } = await withUsers(config, async (users) => {
        const out = { added: [] as string[], skipped: [] as string[] };
        for (const [user, line] of lines) (await users.add(user, line, []) ? out.added : out.skipped).push(user);
        return out;
      });
      return `imported ${added.length} user${added.length === 1 ? '' : 's'}${skipped.length > 0 ? `; already in the store, left as they are: ${skipped.join(', ')}` : ''}`;
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

/**
 * `config check --connect`: a warning for each store user whose name differs from a users-file name
 * only by case (made before such names were refused; it signs in as a user of its own). None when
 * users.store is off, or the store or the file cannot be read (the other checks report those).
 */
export async function storeUserWarnings(config: Config): Promise<string[]> {
  if (!config.users.store || !config.users.htpasswd || config.store.kind === 'memory') return [];
  let names: string[];
  let file: Map<string, string>;
  try {
    file = readHtpasswd(config.users.htpasswd);
    names = (await withUsers(config, (users) => users.list())).map((u) => u.name);
  } catch {
    return [];
  }
  const spelling = otherSpellings(file.keys());
  return names.flatMap((name) => {
    const other = file.has(name) ? undefined : spelling(name);
    return other === undefined ? [] : [`users.store: store user "${name}" differs from "${other}" of the users file only by case: it signs in as a user of its own (new such names are refused); rename or remove it`];
  });
}

/** A name the store has no user under (it may be in the users file, which these commands do not change). */
function noSuchUser(name: string): InputError {
  return new InputError('no such user', `there is no user "${name}" in the store (users list shows them)`);
}

/**
 * The htpasswd file `users import` was given: it is no setting of the configuration, so what is wrong
 * with it (unreadable, a line that is no bcrypt entry) is an input error, not an invalid configuration.
 */
function readImported(file: string): Map<string, string> {
  try {
    return readHtpasswd(file);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // Nothing was imported: the file is read whole before the store is written.
    throw new InputError('import refused', err.problems.map((p) => p.replace(/^users\.htpasswd: /, '')));
  }
}

/** Runs `work` on the store's users (and a way to end a user's sessions on every instance). */
async function withUsers<T>(config: Config, work: (users: StoreUsers, endSessions: (user: string) => Promise<number>) => Promise<T>): Promise<T> {
  if (config.store.kind === 'memory') {
    throw new ConfigError([`${config.file || 'the configuration'}: store.kind is memory, which lives inside the gateway process; this command needs the shared store (store.kind: redis), or the admin API (admin.apiToken)`]);
  }
  const table = createTable<StoreUser>('users', config.store, silentLogger);
  const sessions = createStore(config.store, { now: Date.now }, silentLogger);
  try {
    const ready = await Promise.all([table.waitUntilReady(config.store.connectTimeoutMs), sessions.waitUntilReady(config.store.connectTimeoutMs)]);
    if (!ready.every(Boolean)) throw new StoreUnreachableError(`the store did not answer within store.connectTimeoutMs (${config.store.connectTimeoutMs} ms); nothing was changed`);
    return await work(new StoreUsers(table, silentLogger), (user) => sessions.revokeUser(user));
  } finally {
    await Promise.all([table.close(), sessions.close()]);
  }
}

function groupsOption(value: string | boolean | undefined): string[] {
  const groups = listOf(typeof value === 'string' ? value : undefined);
  for (const g of groups) if (UNSAFE_NAME.test(g)) throw new UsageError(`"${g}" is not a group name`);
  return groups;
}

function costOf(value: string | boolean | undefined, command: string): number {
  if (typeof value !== 'string') return DEFAULT_COST;
  const cost = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(cost >= 4 && cost <= 31)) throw new UsageError('--cost must be an integer from 4 to 31', command);
  if (cost < DEFAULT_COST) process.stderr.write(`auth-gateway: warning: bcrypt cost ${cost} is below ${DEFAULT_COST}; a leaked hash is that much cheaper to crack (use it for tests only)\n`);
  return cost;
}

/** Asked twice without echo on a terminal; else read from stdin (one line). */
async function readPassword(name: string): Promise<string> {
  let password: string;
  if (process.stdin.isTTY) {
    const stdin = process.stdin as ReadStream;
    const first = await readHidden(`Password for ${name}: `, stdin, process.stderr);
    const second = await readHidden('Again: ', stdin, process.stderr);
    if (first !== second) throw new PasswordRefusedError('the passwords do not match; nothing was written');
    password = first;
  } else {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    password = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
  }
  if ([...password].length < MIN_PASSWORD_CHARACTERS) throw new PasswordRefusedError(`the password must have at least ${MIN_PASSWORD_CHARACTERS} characters (it has ${[...password].length}); nothing was written`);
  if (!acceptablePassword(password)) throw new PasswordRefusedError('the password must be at most 72 bytes, without NUL (bcrypt reads no further); nothing was written');
  return password;
}
