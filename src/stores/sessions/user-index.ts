import { createHash, randomBytes, randomInt } from 'node:crypto';

/**
 * Where a user's sessions live (format 5): see sessionPlace below and docs/store.md "Per-user sessions".
 * Two copies whose hash tags are chosen so their Redis Cluster slots lie between a third and two thirds
 * of the slot space apart. Masters serve contiguous slot ranges; with three or more masters of even
 * ranges (what `redis-cli --cluster create` makes) no range is that wide, so the copies are always on
 * different masters.
 *
 * userIndexKeys: the two copies of a user's format-4 index (sorted sets of session ids), read until the
 * sessions made before format 5 expire; sessions with a legacy record (see lua.ts) are in the copy on
 * their hash's slot too.
 */
export function userIndexKeys(user: string): [string, string] {
  const tag = userTag(user);
  return [`u:{${tag}}`, `u:{${otherTag(tag)}}`];
}

/** A digest of the user name (22 base64url characters): the hash tag of the user's keys. */
export function userTag(user: string): string {
  return createHash('sha256').update(user).digest('base64url').slice(0, 22);
}

/** The hash tag of a user's second copy: a slot between a third and two thirds of the slot space away. */
function otherTag(tag: string): string {
  const slot = hashSlot(tag);
  for (let i = 0; ; i++) {
    const other = `${tag}.${i}`;
    const distance = (hashSlot(other) - slot + SLOTS) % SLOTS;
    if (distance >= SLOTS / 3 && distance <= (2 * SLOTS) / 3) return other;
  }
}

/**
 * Sessions (format 5, see session-scripts.ts) live in their user's hash, `ss:{<tag>}` (copy 0) or `ss:{<tag>.<i>}`
 * (copy 1, on another master of a Cluster: a create whose copy-0 slot is down is made there). A session
 * id names its place: `<user tag, 22><copy, 0|1><random, 22 = 128 bits>`; the random part is the field.
 */
export const SESSION_ID = /^([A-Za-z0-9_-]{22})([01])([A-Za-z0-9_-]{22})$/;

export function userSessionKey(tag: string, copy: 0 | 1): string {
  return copy === 0 ? `ss:{${tag}}` : `ss:{${otherTag(tag)}}`;
}

export function sessionIdFor(user: string, copy: 0 | 1, random: string): string {
  return `${userTag(user)}${copy}${random}`;
}

/**
 * The hash and field of a session id of format 5; undefined for any other string. `tag`: the hash's hash
 * tag (its Cluster slot); `legacy`: the session's legacy record and the user's legacy index copy on that
 * slot (see sessionIdOnItsSlot), the keys an earlier release reads; undefined when the id is elsewhere
 * (a session made without them).
 */
export function sessionPlace(sid: string): { key: string; field: string; prefix: string; tag: string; legacy: { record: string; index: string } | undefined } | undefined {
  const m = SESSION_ID.exec(sid);
  if (!m) return undefined;
  const tag = m[2] === '0' ? m[1]! : otherTag(m[1]!);
  const legacy = hashSlot(sid) === hashSlot(tag) ? { record: legacySessionKey(sid), index: `u:{${tag}}` } : undefined;
  return { key: `ss:{${tag}}`, field: m[3]!, prefix: `${m[1]}${m[2]}`, tag, legacy };
}

/** A session's key in the layout before the per-user hashes (format 4, see lua.ts): its id is its hash tag. */
export function legacySessionKey(sid: string): string {
  return `s:{${sid}}`;
}

/**
 * A session id (as sessionIdFor) whose own hash tag, `{sid}`, is on the Cluster slot of the user's hash
 * of that copy, so that the legacy record `s:{sid}` and the legacy index `u:{<tag>}` an earlier release
 * reads live on the session's slot and one script writes, reads and deletes them with the session. The
 * random part is 19 random characters and 3 chosen among the ~16 of 262,144 that land the id on that
 * slot (CRC16 is linear: the prefix's contribution is fixed, the suffix's is looked up): about 118
 * random bits.
 */
export function sessionIdOnItsSlot(user: string, copy: 0 | 1): string {
  const tag = userTag(user);
  const target = hashSlot(copy === 0 ? tag : otherTag(tag));
  const { start, suffixes } = suffixBuckets();
  for (;;) {
    const prefix = `${tag}${copy}${randomBytes(15).toString('base64url').slice(0, 19)}`;
    let crc = crc16(prefix);
    for (let k = 0; k < SUFFIX_CHARS; k++) crc = crcByte(crc, 0);
    const bucket = target ^ (crc & (SLOTS - 1));
    const count = start[bucket + 1]! - start[bucket]!;
    // Every bucket has suffixes (test/unit/store-parts.test.ts); a new prefix otherwise.
    if (count === 0) continue;
    const sid = prefix + suffixText(suffixes[start[bucket]! + randomInt(count)]!);
    if (hashSlot(sid) === target) return sid;
  }
}

const SLOTS = 16384;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const SUFFIX_CHARS = 3;

function suffixText(n: number): string {
  return ALPHABET[n >> 12]! + ALPHABET[(n >> 6) & 63]! + ALPHABET[n & 63]!;
}

let buckets: { start: Uint32Array; suffixes: Uint32Array } | undefined;

/** Every 3-character base64url suffix, grouped by the low 14 bits of its CRC16 (what it adds to a slot). */
function suffixBuckets(): { start: Uint32Array; suffixes: Uint32Array } {
  if (buckets) return buckets;
  const total = 64 ** SUFFIX_CHARS;
  const codes = Array.from(ALPHABET, (c) => c.charCodeAt(0));
  const slotOf = new Uint16Array(total);
  const start = new Uint32Array(SLOTS + 1);
  for (let a = 0; a < 64; a++) {
    const crcA = crcByte(0, codes[a]!);
    for (let b = 0; b < 64; b++) {
      const crcAB = crcByte(crcA, codes[b]!);
      for (let c = 0; c < 64; c++) {
        const n = (a << 12) | (b << 6) | c;
        slotOf[n] = crcByte(crcAB, codes[c]!) & (SLOTS - 1);
        start[slotOf[n]! + 1]!++;
      }
    }
  }
  for (let b = 0; b < SLOTS; b++) start[b + 1]! += start[b]!;
  const next = start.slice(0, SLOTS);
  const suffixes = new Uint32Array(total);
  for (let n = 0; n < total; n++) suffixes[next[slotOf[n]!]!++] = n;
  buckets = { start, suffixes };
  return buckets;
}

/** CRC16 (XMODEM: polynomial 0x1021, initial 0), one byte at a time from a table. */
const CRC_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let b = 0; b < 256; b++) {
    let crc = b << 8;
    for (let k = 0; k < 8; k++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[b] = crc;
  }
  return table;
})();

function crcByte(crc: number, byte: number): number {
  return ((crc << 8) ^ CRC_TABLE[((crc >> 8) ^ byte) & 0xff]!) & 0xffff;
}

function crc16(text: string): number {
  let crc = 0;
  for (const byte of Buffer.from(text, 'utf8')) crc = crcByte(crc, byte);
  return crc;
}

/** Redis Cluster's key slot of a hash tag: CRC16 (XMODEM) mod 16384. */
export function hashSlot(tag: string): number {
  return crc16(tag) % SLOTS;
}
