import { canonicalName, isCanonicalName, type DirectoryUsers } from './directory-users.js';
import type { PasswordSource } from './password-check.js';
import type { PasswordVerifier } from './password-verifier.js';

/**
 * A lookup over `names` (the users file's): for a name, the one of `names` that is another spelling of
 * it, not the same string but the same once case and compatibility forms are folded (`Alice`, `ALICE`
 * or `ａlice` beside `alice`); undefined when none is. Such a pair would sign in as two principals (two
 * lockout budgets, rate-limit buckets, allow-rule names) for what reads as one name: a store user may
 * not be another spelling of a file user.
 */
export function otherSpellings(names: Iterable<string>): (name: string) => string | undefined {
  const byCanonical = new Map<string, string>();
  for (const name of names) byCanonical.set(canonicalName(name), name);
  return (name) => {
    const other = byCanonical.get(canonicalName(name));
    return other === name ? undefined : other;
  };
}

/**
 * The users of the htpasswd file and, when users.ldap is set, of the directory, as one password source.
 * A name in the file is the file's: it is verified against its hash and never bound in the directory (a
 * directory entry of the same name cannot take over a local account, and local accounts keep working
 * while the directory is down). So is a name the directory would match as a file name (`DAVE` or
 * `ｄａｖｅ` beside the file's `dave`: the same canonical spelling), and a name not in its canonical
 * spelling (see canonicalName), which the file then refuses like any name it does not have (401,
 * counted by the lockout, no bind). Every other name is the directory's.
 */
export class UserSources implements PasswordSource {
  /** The canonical spellings of the file's names, for the file's table they were made of. */
  private fileSpellings: { table: ReadonlyMap<string, string>; names: ReadonlySet<string> } | undefined;

  /**
   * `confirm`: for a name the users file does not have, makes sure the users kept in the store beside the
   * file's (held in `file`'s table) are as the store has them now (see StoreUsers.confirm).
   */
  constructor(
    private readonly file: PasswordVerifier,
    readonly directory: DirectoryUsers | undefined,
    private readonly confirmOther?: (user: string) => void | Promise<void>,
  ) {}

  confirm(user: string): void | Promise<void> {
    return this.confirmOther?.(user);
  }

  /** Whether the directory, not the file, has this name (false without a directory). */
  inDirectory(user: string): boolean {
    return this.directory !== undefined && isCanonicalName(user) && !this.file.table.has(user) && !this.fileSpelling(user);
  }

  /** Whether a name of the file has this canonical spelling (worked out once per version of the file's table). */
  private fileSpelling(canonical: string): boolean {
    const table = this.file.table;
    if (this.fileSpellings?.table !== table) {
      this.fileSpellings = { table, names: new Set([...table.keys()].map(canonicalName)) };
    }
    return this.fileSpellings.names.has(canonical);
  }

  attemptKey(user: string, password: string): string {
    return this.inDirectory(user) ? this.directory!.attemptKey(user, password) : this.file.attemptKey(user, password);
  }

  isCachedKey(key: string): boolean {
    return this.file.isCachedKey(key) || (this.directory?.isCachedKey(key) ?? false);
  }

  /**
   * The file's: which source a name belongs to follows from the file's table alone, and the
   * directory's keys never change.
   */
  get keyEpoch(): unknown {
    return this.file.keyEpoch;
  }

  verify(user: string, password: string): Promise<boolean> {
    return this.inDirectory(user) ? this.directory!.verify(user, password) : this.file.verify(user, password);
  }

  /**
   * What a token issued now must still match: the file's fingerprint of the user's hash, or for a
   * directory user the directory's version (the directory, not a hash, decides; see DirectoryUsers.groupsNow
   * for a user removed from it).
   */
  credentialVersion(user: string): string | undefined {
    return this.file.credentialVersion(user) ?? (this.directory ? this.directory.version : undefined);
  }
}
