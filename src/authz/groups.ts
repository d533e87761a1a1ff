import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from '../log.js';
import { readHtgroup, type GroupTable } from './htgroup.js';

const RELOAD_DEBOUNCE_MS = 50;
const NONE: readonly string[] = Object.freeze([]);

/** Who is in which group: what the allow rules, the identity headers and the assertions read. */
export interface Groups {
  /** The user's groups, sorted; empty when none (or no groups file). */
  of(user: string): readonly string[];
  /** Subscribes to changes of the table (a reload that changed something); returns the unsubscribe. */
  onChange(listener: () => void): () => void;
}

/** No groups file: nobody is in any group. */
export const noGroups: Groups = { of: () => NONE, onChange: () => () => {} };

/**
 * The groups of an htgroup file, read at start (a broken file stops the start) and, like the users
 * file, again when it changes (its folder is watched: editors replace files) and on reload(). A broken
 * file on reload is logged and the previous groups stay in force. Listeners hear every change, so open
 * WebSocket tunnels of a user removed from a group can be closed at once.
 */
export class GroupsFile implements Groups {
  private table: GroupTable;
  private readonly listeners = new Set<() => void>();
  private watcher: FSWatcher | undefined;
  private reloadTimer: NodeJS.Timeout | undefined;

  constructor(readonly file: string, private readonly log: Logger, watchFile: boolean) {
    this.table = readHtgroup(file);
    if (watchFile) this.watch();
  }

  of(user: string): readonly string[] {
    return this.table.get(user) ?? NONE;
  }

  get userCount(): number {
    return this.table.size;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reads the file again now; false (and the old groups kept) when it is broken. */
  reload(): boolean {
    let next: GroupTable;
    try {
      next = readHtgroup(this.file);
    } catch (err) {
      this.log.error('groups file not reloaded; keeping the previous groups', { error: (err as Error).message });
      return false;
    }
    const changed = !sameTable(this.table, next);
    this.table = next;
    this.log.info('groups reloaded', { file: this.file, users: next.size, changed });
    if (changed) for (const listener of [...this.listeners]) listener();
    return true;
  }

  close(): void {
    clearTimeout(this.reloadTimer);
    this.watcher?.close();
    this.listeners.clear();
  }

  private watch(): void {
    const name = basename(this.file);
    this.watcher = watch(dirname(this.file), { persistent: false }, (_event, changed) => {
      if (changed !== null && changed !== name) return;
      clearTimeout(this.reloadTimer);
      this.reloadTimer = setTimeout(() => this.reload(), RELOAD_DEBOUNCE_MS);
    });
    this.watcher.on('error', (err) => this.log.error('groups file watch failed', { error: err.message }));
  }
}

function sameTable(a: GroupTable, b: GroupTable): boolean {
  if (a.size !== b.size) return false;
  for (const [user, groups] of a) {
    const other = b.get(user);
    if (!other || other.length !== groups.length || other.some((g, i) => g !== groups[i])) return false;
  }
  return true;
}
