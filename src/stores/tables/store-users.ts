import type { Logger } from '../../log.js';
import type { SharedTable } from './shared-table.js';

/** A user kept in the store (`users.store: true`): a bcrypt hash and groups; never a password. */
export interface StoreUser {
  hash: string;
  groups: string[];
  createdAtMs: number;
  changedAtMs: number;
}

/** How often the whole table is read again: the backstop for changes missed while the change channel was down. */
const RESYNC_MS = 5000;
/** How long the first read waits for the store's connection before it is tried anyway. */
const FIRST_READ_WAIT_MS = 10_000;
/** How soon a first read that failed is tried again (the resync pace after it answered). */
const FIRST_READ_RETRY_MS = 250;

/**
 * The users kept in the store, mirrored in full on every instance: read whole at start (once the
 * store's connection is up) and every RESYNC_MS, and each user again as soon as a change to it is heard
 * on the table's change channel (a removed or changed user leaves the mirror at once, before it is read
 * again). Listeners hear every change of the mirror. The same table serves the CLI and the admin API to
 * change the users.
 *
 * The mirror is not trusted by itself for a sign-in: `confirm` holds it to the table's own guarantee
 * (the entry answered from memory only while the change channel is up and fresh, else read again), so
 * when a change has answered no instance accepts the user as it was, whether or not it heard the change,
 * and a user the mirror does not know yet (a start, a missed message) is read from the store.
 */
export class StoreUsers {
  private mirror = new Map<string, StoreUser>();
  private readonly listeners = new Set<() => void>();
  private readonly unsubscribe: () => void;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private loaded = false;
  /** The first read's failure was logged (once, not at every retry). */
  private warned = false;
  /** Changes heard so far: a read that a later change overtook is not applied. */
  private changes = 0;
  private readonly generation = new Map<string, number>();

  constructor(readonly table: SharedTable<StoreUser>, private readonly log: Logger, private readonly now: () => number = Date.now) {
    this.unsubscribe = table.onChanged((name) => this.heard(name));
  }

  /**
   * Starts mirroring: the first read once the store's connection is up (a command sent before is refused
   * at once, not queued), retried every FIRST_READ_RETRY_MS until it answers, then every RESYNC_MS.
   */
  start(): void {
    const tick = () => {
      if (this.closed) return;
      void this.resync().finally(() => {
        if (!this.closed) this.timer = setTimeout(tick, this.loaded ? RESYNC_MS : FIRST_READ_RETRY_MS).unref();
      });
    };
    void this.table.waitUntilReady(FIRST_READ_WAIT_MS).then(tick);
  }

  /**
   * Makes the mirror's entry for `name` the store's now before it is trusted: at once when the table
   * knows it without waiting (the memory table; Redis while the change channel is up and fresh and the
   * entry was read), else read from the store. A user the mirror holds is not trusted when the store
   * cannot answer (rejects with StoreUnavailableError, a 503); a name it does not hold stays unknown then.
   */
  confirm(name: string): void | Promise<void> {
    const known = this.table.getNow(name);
    if (known !== undefined) {
      this.take(name, known, this.generation.get(name));
      return;
    }
    const seen = this.generation.get(name);
    return this.table.get(name).then((user) => this.take(name, user, seen), (err: unknown) => {
      if (this.mirror.has(name)) throw err;
    });
  }

  /** Whether the whole table has been read at least once. */
  get ready(): boolean {
    return this.loaded;
  }

  users(): ReadonlyMap<string, StoreUser> {
    return this.mirror;
  }

  groupsOf(name: string): readonly string[] | undefined {
    return this.mirror.get(name)?.groups;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.unsubscribe();
    this.listeners.clear();
  }

  // Management (CLI, admin API): each answers once every instance whose change channel is up has heard it.

  add(name: string, hash: string, groups: string[]): Promise<boolean> {
    const now = this.now();
    return this.table.create(name, { hash, groups, createdAtMs: now, changedAtMs: now });
  }

  async passwd(name: string, hash: string): Promise<boolean> {
    const user = await this.table.get(name);
    return user !== null && this.table.update(name, { ...user, hash, changedAtMs: this.now() });
  }

  async setGroups(name: string, groups: string[]): Promise<boolean> {
    const user = await this.table.get(name);
    return user !== null && this.table.update(name, { ...user, groups, changedAtMs: this.now() });
  }

  async remove(name: string): Promise<boolean> {
    return (await this.table.remove(name)) !== null;
  }

  async list(): Promise<Array<{ name: string; groups: string[]; createdAtMs: number; changedAtMs: number }>> {
    const all = await this.table.all();
    return all.map(({ id, value }) => ({ name: id, groups: value.groups, createdAtMs: value.createdAtMs, changedAtMs: value.changedAtMs }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** A change heard: the user leaves the mirror at once, then comes back as the store has it now. */
  private heard(name: string): void {
    ++this.changes;
    const seen = (this.generation.get(name) ?? 0) + 1;
    this.generation.set(name, seen);
    if (this.mirror.has(name)) {
      this.mirror = new Map(this.mirror);
      this.mirror.delete(name);
      this.emit();
    }
    this.table.get(name).then((user) => {
      if (this.closed || user === null || seen !== this.generation.get(name)) return;
      const before = this.mirror.get(name);
      if (before && same(before, user)) return;
      this.mirror = new Map(this.mirror).set(name, user);
      this.emit();
    }, () => {
      // The store cannot answer now: the next resync reads it.
    });
  }

  /** The store's entry for `name`, read while no change to it was heard since `seen`, into the mirror. */
  private take(name: string, user: StoreUser | null, seen: number | undefined): void {
    if (this.closed || seen !== this.generation.get(name)) return;
    const before = this.mirror.get(name);
    if (user === null ? before === undefined : same(user, before)) return;
    this.mirror = new Map(this.mirror);
    if (user === null) this.mirror.delete(name);
    else this.mirror.set(name, user);
    this.emit();
  }

  private async resync(): Promise<void> {
    const seen = this.changes;
    let all;
    try {
      all = await this.table.all();
    } catch (err) {
      if (!this.loaded && !this.warned) this.log.warn('users of the store not read yet; each is read from the store at its sign-in until the store answers', { error: (err as Error).message });
      this.warned = !this.loaded;
      return;
    }
    const next = new Map(all.map(({ id, value }) => [id, value]));
    const changed = next.size !== this.mirror.size || [...next].some(([name, u]) => !same(u, this.mirror.get(name)));
    // A change heard while the table was read: the read may predate it; the next resync applies.
    if (seen !== this.changes) return;
    this.loaded = true;
    if (!changed || this.closed) return;
    this.mirror = next;
    this.emit();
  }

  private emit(): void {
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch (err) {
        this.log.error('a listener of the store users failed', { error: (err as Error).message });
      }
    }
  }
}

function same(a: StoreUser, b: StoreUser | undefined): boolean {
  return b !== undefined && a.hash === b.hash && a.groups.length === b.groups.length && a.groups.every((g, i) => g === b.groups[i]);
}
