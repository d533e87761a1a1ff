import { createHash } from 'node:crypto';

/**
 * Where a user's sessions live (format 5): see sessionPlace below and docs/store.md "Per-user sessions".
 * Two copies whose hash tags are chosen so their Redis Cluster slots lie between a third and two thirds
 * of the slot space apart. Masters serve contiguous slot ranges; with three or more masters of even
 * ranges (what `redis-cli --cluster create` makes) no range is that wide, so the copies are always on
 * different masters.
 *
 * userIndexKeys: the two copies of a user's format-4 index (sorted sets of session ids), read until the
 * sessions made before format 5 expire.
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
const SESSION_ID = /^([A-Za-z0-9_-]{22})([01])([A-Za-z0-9_-]{22})$/;

export function userSessionKey(tag: string, copy: 0 | 1): string {
  return copy === 0 ? `ss:{${tag}}` : `ss:{${otherTag(tag)}}`;
}

export function sessionIdFor(user: string, copy: 0 | 1, random: string): string {
  return `${userTag(user)}${copy}${random}`;
}

/** The hash and field of a session id of format 5; undefined for any other string. */
export function sessionPlace(sid: string): { key: string; field: string; prefix: string } | undefined {
  const m = SESSION_ID.exec(sid);
  if (!m) return undefined;
  return { key: userSessionKey(m[1]!, m[2] === '0' ? 0 : 1), field: m[3]!, prefix: `${m[1]}${m[2]}` };
}

const SLOTS = 16384;

/** Redis Cluster's key slot of a hash tag: CRC16 (XMODEM) mod 16384. */
export function hashSlot(tag: string): number {
  let crc = 0;
  for (const byte of Buffer.from(tag, 'utf8')) {
    crc ^= byte << 8;
    for (let k = 0; k < 8; k++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % SLOTS;
}
