import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Clock } from '../clock.js';
import type { UsersConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { readHtpasswd } from './htpasswd.js';
import { PasswordVerifier } from './password-verifier.js';
import { otherSpellings } from './user-sources.js';

const RELOAD_DEBOUNCE_MS = 50;

/** Told the users whose line was removed or changed: their sessions end (see Runtime). */
export type UsersEnded = (users: string[]) => void;

/**
 * The users of the htpasswd file. The file's folder is watched (editors and `htpasswd` replace the
 * file rather than write it in place), and a change takes effect without a restart; a broken file is
 * logged and the previous users stay in force. Users whose line is removed or changed are handed to
 * `ended`, so their sessions are revoked in the store: putting the same line back later revives nothing.
 */
export class Credentials {
  readonly verifier: PasswordVerifier;
  private watcher: FSWatcher | undefined;
  private reloadTimer: NodeJS.Timeout | undefined;
  /** The file's users, and those of another source beside it (see follow). */
  private fileUsers: Map<string, string>;
  private otherUsers: ReadonlyMap<string, string> = new Map();
  private unfollow: () => void = () => {};
  /** The store users last warned about as another spelling of a file user's name. */
  private otherSpellingsWarned = '';

  constructor(private readonly config: UsersConfig, clock: Clock, private readonly log: Logger, private readonly ended: UsersEnded = () => {}) {
    // users.htpasswd may be left out when another source of users is set.
    this.fileUsers = config.htpasswd ? readHtpasswd(config.htpasswd) : new Map();
    this.verifier = new PasswordVerifier(this.fileUsers, config.cacheTtlSeconds * 1000, clock, config.maxPendingVerifications);
    if (config.watch && config.htpasswd) this.watch();
  }

  /**
   * Takes the users of another source (the store) beside the file's, now and at each change it
   * reports: a removed or changed one ends like a removed or changed line. A name in both is refused
   * from the other source, naming it: the file's line stays in force.
   */
  follow(source: { users(): ReadonlyMap<string, { hash: string }>; onChange(listener: () => void): () => void }): void {
    const take = () => {
      const other = new Map<string, string>();
      for (const [name, u] of source.users()) other.set(name, u.hash);
      this.otherUsers = other;
      this.apply();
    };
    this.unfollow = source.onChange(take);
    take();
  }

  /** The names in the users file (another source may not have one of them). */
  fileUserNames(): Iterable<string> {
    return this.fileUsers.keys();
  }

  /** Whether the users file has this name (the file's user, whatever another source holds). */
  inFile(user: string): boolean {
    return this.fileUsers.has(user);
  }

  private apply(): string[] {
    const merged = new Map(this.fileUsers);
    const both: string[] = [];
    for (const [name, hash] of this.otherUsers) {
      if (merged.has(name)) both.push(name);
      else merged.set(name, hash);
    }
    if (both.length > 0) this.log.error('users in both the users file and the store refused from the store (the file\'s line is in force); remove one', { users: both });
    this.warnOtherSpellings();
    const ended = this.verifier.replaceUsers(merged);
    if (ended.length > 0) this.ended(ended);
    return ended;
  }

  /**
   * Store users whose name differs from a file user's only by case (made before such names were
   * refused): they keep working, as users of their own, and are named in a warning each time the list
   * changes (at start, once the store's users are read, and when the file or the store changes).
   */
  private warnOtherSpellings(): void {
    const spelling = otherSpellings(this.fileUsers.keys());
    const pairs = [...this.otherUsers.keys()].flatMap((name) => {
      const file = this.fileUsers.has(name) ? undefined : spelling(name);
      return file === undefined ? [] : [`${name} (file: ${file})`];
    });
    const listed = pairs.join(', ');
    if (listed === this.otherSpellingsWarned) return;
    this.otherSpellingsWarned = listed;
    if (pairs.length > 0) {
      this.log.warn('store users differ from a users-file name only by case: they sign in as users of their own, and new ones are refused; rename or remove them', { users: pairs });
    }
  }

  /** Reads the file again now; false (and the old users kept) when it is broken. */
  reload(): boolean {
    try {
      this.fileUsers = this.config.htpasswd ? readHtpasswd(this.config.htpasswd) : new Map();
      this.apply();
      this.log.info('users reloaded', { file: this.config.htpasswd, users: this.verifier.userCount });
      return true;
    } catch (err) {
      this.log.error('users file not reloaded; keeping the previous users', { error: (err as Error).message });
      return false;
    }
  }

  close(): void {
    this.unfollow();
    clearTimeout(this.reloadTimer);
    this.watcher?.close();
  }

  private watch(): void {
    const name = basename(this.config.htpasswd);
    this.watcher = watch(dirname(this.config.htpasswd), { persistent: false }, (_event, changed) => {
      if (changed !== null && changed !== name) return;
      clearTimeout(this.reloadTimer);
      this.reloadTimer = setTimeout(() => this.reload(), RELOAD_DEBOUNCE_MS);
    });
    this.watcher.on('error', (err) => this.log.error('users file watch failed', { error: err.message }));
  }
}
