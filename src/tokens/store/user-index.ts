import { createHash } from 'node:crypto';

/**
 * Where a user's session index lives: two copies, `u:{a}` and `u:{b}`, whose hash tags are chosen so
 * their Redis Cluster slots lie between a third and two thirds of the slot space apart. Masters serve
 * contiguous slot ranges; with three or more masters of even ranges (what `redis-cli --cluster create`
 * makes) no range is that wide, so the copies are always on different masters.
 *
 * A create writes its session and both copies and succeeds when the session and at least one copy are
 * written: a user whose index slot is down can still sign in. revokeUser reads both copies and revokes
 * the union, so every session is found while at most one copy is unreachable; it writes the union back
 * to both (repair), and so does every refresh, so a copy that missed writes during an outage catches up.
 */
export function userIndexKeys(user: string): [string, string] {
  const tag = createHash('sha256').update(user).digest('base64url').slice(0, 22);
  const slot = hashSlot(tag);
  for (let i = 0; ; i++) {
    const other = `${tag}.${i}`;
    const distance = (hashSlot(other) - slot + SLOTS) % SLOTS;
    if (distance >= SLOTS / 3 && distance <= (2 * SLOTS) / 3) return [`u:{${tag}}`, `u:{${other}}`];
  }
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
