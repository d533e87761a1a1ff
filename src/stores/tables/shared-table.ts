/**
 * A small table every instance shares (API keys, users kept in the store): entries by id, each a JSON
 * value, with a side note per entry that changes often and matters little (an API key's last use). Reads
 * are answered from memory once an entry was read, and that memory is kept true by a change channel:
 * when `update` or `remove` has answered, no instance answers from the entry as it was (the same
 * guarantee, and the same machinery, as session revocation: see LivenessCache and RevocationChannel).
 * Every method but getNow and note answers or throws StoreUnavailableError.
 */
export interface SharedTable<T> {
  readonly kind: 'memory' | 'redis';
  /**
   * The entry when it is known right now without waiting (the memory table always knows: the value or
   * null for none; Redis from its cache while the change channel is up and fresh), else undefined (ask get).
   */
  getNow(id: string): T | null | undefined;
  /** The entry as the store has it now (null: none); remembered for getNow. */
  get(id: string): Promise<T | null>;
  /** Adds an entry; false (and nothing changed) when the id is taken. */
  create(id: string, value: T): Promise<boolean>;
  /** Replaces an entry; false when there is none. Answers once no instance answers from the old value. */
  update(id: string, value: T): Promise<boolean>;
  /** Deletes an entry (and its note); answers what it was (null: none) once no instance answers from it. */
  remove(id: string): Promise<T | null>;
  /** Every entry, with its note. */
  all(): Promise<Array<{ id: string; value: T; note: string | undefined }>>;
  /** Writes the entry's side note, best effort (never throws, never waited for by a request). */
  note(id: string, text: string): void;
  /** Hears the id of each entry changed or removed from now on, here and (redis) on any instance. */
  onChanged(listener: (id: string) => void): () => void;
  /** Resolves true once connected, or false after `timeoutMs`; never throws. */
  waitUntilReady(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/** One process's table: what the memory store kind uses. Values are kept as JSON text, so a caller never shares an object with it. */
export class MemoryTable<T> implements SharedTable<T> {
  readonly kind = 'memory';
  private readonly entries = new Map<string, { json: string; value: T; note: string | undefined }>();
  private readonly listeners = new Set<(id: string) => void>();

  getNow(id: string): T | null {
    return this.entries.get(id)?.value ?? null;
  }

  async get(id: string): Promise<T | null> {
    return this.getNow(id);
  }

  async create(id: string, value: T): Promise<boolean> {
    if (this.entries.has(id)) return false;
    this.set(id, value, undefined);
    this.changed(id);
    return true;
  }

  async update(id: string, value: T): Promise<boolean> {
    const old = this.entries.get(id);
    if (!old) return false;
    this.set(id, value, old.note);
    this.changed(id);
    return true;
  }

  async remove(id: string): Promise<T | null> {
    const old = this.entries.get(id);
    this.entries.delete(id);
    this.changed(id);
    return old ? (JSON.parse(old.json) as T) : null;
  }

  async all(): Promise<Array<{ id: string; value: T; note: string | undefined }>> {
    return [...this.entries].map(([id, e]) => ({ id, value: JSON.parse(e.json) as T, note: e.note }));
  }

  note(id: string, text: string): void {
    const e = this.entries.get(id);
    if (e) e.note = text;
  }

  onChanged(listener: (id: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async waitUntilReady(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }

  private set(id: string, value: T, note: string | undefined): void {
    const json = JSON.stringify(value);
    // The copy handed to readers is frozen: a reader cannot change the table by accident.
    this.entries.set(id, { json, value: deepFreeze(JSON.parse(json) as T), note });
  }

  private changed(id: string): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(id);
      } catch {
        // a listener's own failure; the rest still hear it
      }
    }
  }
}

export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
