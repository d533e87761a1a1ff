import { randomBytes } from 'node:crypto';
import { sha256 } from '../../core/digest.js';
import type { SharedTable } from './shared-table.js';

/** What the store keeps of an API key: never its secret, only the SHA-256 of it. */
export interface ApiKeyRecord {
  id: string;
  name: string;
  /** The principal's user (default: the key's name). */
  user: string;
  groups: string[];
  /** Paths the key may call (each with what is under it); empty: any route. */
  routes: string[];
  /** Methods the key may use (upper case); empty: any. */
  methods: string[];
  /** Milliseconds since the epoch; undefined: never expires. */
  expiresAtMs: number | undefined;
  /** The key's own rate limit, beside the route's; undefined: none. */
  rate: { requests: number; windowSeconds: number } | undefined;
  createdAtMs: number;
  /** SHA-256 of the secret, base64url. The secret is 256 random bits: no slow hash is needed. */
  sha256: string;
  /** Set on a key that was rotated: the id of its successor. */
  rotatedTo?: string;
}

/** What `keys list` shows: the record without its hash, with its last use. */
export type ApiKeyInfo = Omit<ApiKeyRecord, 'sha256'> & { lastUsedAtMs: number | undefined };

export interface NewApiKey {
  name: string;
  user?: string;
  groups?: string[];
  routes?: string[];
  methods?: string[];
  /** Seconds from now; undefined: never. */
  expiresInSeconds?: number;
  rate?: { requests: number; windowSeconds: number };
}

export interface PresentedKey {
  id: string;
  secret: string;
}

/** A key's last use is written at most this often per key (per instance). */
const LAST_USED_EVERY_MS = 60_000;
const ID = /^[0-9a-f]{16}$/;
const SECRET = /^[A-Za-z0-9_-]{43}$/;
/** What is compared with when there is no key of the presented id (32 zero bytes): unknown keys take the same steps. */
const NO_KEY = 'A'.repeat(43);

/**
 * The API keys of the store: created with a random id and a 256-bit secret shown once as
 * `<prefix>_<id>_<secret>`; verified against the SHA-256 kept, from memory after the first use (the
 * table's change channel keeps that memory true on every instance); revoked and rotated through the
 * table, so that when `revoke` answers no instance accepts the key.
 */
export class ApiKeys {
  private readonly lastNoted = new Map<string, number>();

  constructor(readonly table: SharedTable<ApiKeyRecord>, private readonly now: () => number = Date.now) {}

  /**
   * The key's record when known without waiting (null: no such key), else undefined. An expired key's
   * record is not answered from memory: it takes the store round trip an unknown or revoked key takes,
   * so the three are refused alike.
   */
  lookupNow(id: string): ApiKeyRecord | null | undefined {
    const record = this.table.getNow(id);
    if (record && this.table.kind === 'redis' && record.expiresAtMs !== undefined && record.expiresAtMs <= this.now()) return undefined;
    return record;
  }

  lookup(id: string): Promise<ApiKeyRecord | null> {
    return this.table.get(id);
  }

  /**
   * Whether `presented` is the key of `record` and usable now: the secret's hash compared in constant
   * time (with a zero hash when there is no record), then the expiry. Undefined when it is; else why not.
   */
  judge(record: ApiKeyRecord | null, presented: PresentedKey): 'unknown' | 'expired' | undefined {
    const same = sameDigest(record ? record.sha256 : NO_KEY, sha256(presented.secret));
    if (!record || !same) return 'unknown';
    if (record.expiresAtMs !== undefined && record.expiresAtMs <= this.now()) return 'expired';
    this.used(record.id);
    return undefined;
  }

  /** Creates a key; answers its record and the key text, which is shown once and never stored. */
  async create(spec: NewApiKey, prefix: string): Promise<{ record: ApiKeyRecord; key: string }> {
    for (;;) {
      const id = randomBytes(8).toString('hex');
      const secret = randomBytes(32).toString('base64url');
      const now = this.now();
      const record: ApiKeyRecord = {
        id,
        name: spec.name,
        user: spec.user ?? spec.name,
        groups: spec.groups ?? [],
        routes: spec.routes ?? [],
        methods: spec.methods ?? [],
        expiresAtMs: spec.expiresInSeconds === undefined ? undefined : now + spec.expiresInSeconds * 1000,
        rate: spec.rate,
        createdAtMs: now,
        sha256: sha256(secret),
      };
      // 64 random bits: a taken id is all but impossible, and then simply drawn again.
      if (await this.table.create(id, record)) return { record, key: formatKey(prefix, id, secret) };
    }
  }

  /** Every key, oldest first, without hashes. */
  async list(): Promise<ApiKeyInfo[]> {
    const all = await this.table.all();
    return all
      .map(({ value: { sha256: _sha256, ...info }, note }) => ({ ...info, lastUsedAtMs: note === undefined ? undefined : Number(note) }))
      .sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id));
  }

  /** Deletes the key; answers (its record, or null when there was none) once no instance accepts it. */
  revoke(id: string): Promise<ApiKeyRecord | null> {
    return this.table.remove(id);
  }

  /**
   * A new key with the old one's name, user, groups, routes, methods, rate and lifetime; the old one
   * works until `overlapSeconds` from now (0: revoked at once), and not past its own expiry. Answers
   * once every instance holds the old one to its new end; null when there is no key `id`.
   */
  async rotate(id: string, overlapSeconds: number, prefix: string): Promise<{ record: ApiKeyRecord; key: string; old: ApiKeyRecord } | null> {
    const old = await this.table.get(id);
    if (!old) return null;
    const lifetime = old.expiresAtMs === undefined ? undefined : Math.max(1, Math.round((old.expiresAtMs - old.createdAtMs) / 1000));
    const made = await this.create({ name: old.name, user: old.user, groups: old.groups, routes: old.routes, methods: old.methods, rate: old.rate, expiresInSeconds: lifetime }, prefix);
    if (overlapSeconds <= 0) {
      await this.table.remove(id);
      return { ...made, old };
    }
    const end = this.now() + overlapSeconds * 1000;
    const updated: ApiKeyRecord = { ...old, rotatedTo: made.record.id, expiresAtMs: old.expiresAtMs === undefined ? end : Math.min(old.expiresAtMs, end) };
    if (!(await this.table.update(id, updated))) return { ...made, old };
    return { ...made, old: updated };
  }

  /** The key's last use, written at most once a minute per key (best effort). */
  private used(id: string): void {
    const now = this.now();
    const last = this.lastNoted.get(id);
    if (last !== undefined && now - last < LAST_USED_EVERY_MS) return;
    if (this.lastNoted.size >= 100_000) this.lastNoted.clear();
    this.lastNoted.set(id, now);
    this.table.note(id, String(now));
  }
}

function formatKey(prefix: string, id: string, secret: string): string {
  return `${prefix}_${id}_${secret}`;
}

/**
 * Whether two digests (base64url text) are equal, in a time that does not depend on where they differ:
 * every character is looked at. The digest's text is compared as it is kept, with no Hash object or
 * Buffers made per request (they cost several times the hashing).
 */
function sameDigest(expected: string, given: string): boolean {
  if (expected.length !== given.length) return false;
  let diff = 0;
  for (let i = 0; i < expected.length; i++) diff |= expected.charCodeAt(i) ^ given.charCodeAt(i);
  return diff === 0;
}

/** `<prefix>_<id>_<secret>` of this prefix, or undefined for anything else. */
export function parseKey(text: string, prefix: string): PresentedKey | undefined {
  if (text.length !== prefix.length + 1 + 16 + 1 + 43 || !text.startsWith(prefix) || text.charCodeAt(prefix.length) !== 0x5f) return undefined;
  const id = text.slice(prefix.length + 1, prefix.length + 17);
  const secret = text.slice(prefix.length + 18);
  if (text.charCodeAt(prefix.length + 17) !== 0x5f || !ID.test(id) || !SECRET.test(secret)) return undefined;
  return { id, secret };
}
