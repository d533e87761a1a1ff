import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Clock } from '../clock.js';
import type { UsersConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { readHtpasswd } from './htpasswd.js';
import { PasswordVerifier } from './password-verifier.js';

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

  constructor(private readonly config: UsersConfig, clock: Clock, private readonly log: Logger, private readonly ended: UsersEnded = () => {}) {
    this.verifier = new PasswordVerifier(this.read(), config.cacheTtlSeconds * 1000, clock, config.maxPendingVerifications);
    if (config.watch && config.htpasswd) this.watch();
  }

  /** Reads the file again now; false (and the old users kept) when it is broken. */
  reload(): boolean {
    try {
      const ended = this.verifier.replaceUsers(this.read());
      this.log.info('users reloaded', { file: this.config.htpasswd, users: this.verifier.userCount });
      if (ended.length > 0) this.ended(ended);
      return true;
    } catch (err) {
      this.log.error('users file not reloaded; keeping the previous users', { error: (err as Error).message });
      return false;
    }
  }

  /** The file's users; none when there is no file (another source, the directory, has the users). */
  private read(): Map<string, string> {
    return this.config.htpasswd ? readHtpasswd(this.config.htpasswd) : new Map();
  }

  close(): void {
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
