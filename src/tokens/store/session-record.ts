import { createHash } from 'node:crypto';
import { CURRENT_DIGEST_BYTES, FORMAT } from './lua.js';

/**
 * The store keeps a 96-bit digest of the current refresh hash and the first 40 bits of it for each
 * rotated-away one (see lua.ts). The refresh hash is already a SHA-256 of a 256-bit secret; hashing it
 * once more only makes any caller's string (tests use short ones) a fixed-size, uniformly spread value.
 * 96 bits stand in for a secret nobody can guess; 40 bits are plenty for "is this one of the last 32
 * tokens of this session": the presenter must know the session id (only its tokens carry it) and would
 * still hit one of 32 values out of 2^40, and a hit only revokes that session.
 */
export function refreshDigest(refreshHash: string): Buffer {
  return createHash('sha256').update(refreshHash).digest().subarray(0, CURRENT_DIGEST_BYTES);
}

export interface SessionRecord {
  sub: string;
  createdAtMs: number;
  refreshedAtMs: number;
}

/** Reads the fields an operator may see (never a digest) from a stored session; undefined if not one. */
export function readSessionRecord(raw: Buffer | null): SessionRecord | undefined {
  if (!raw || raw.length < 33 || raw[0] !== FORMAT) return undefined;
  const subLength = raw.readUInt16BE(31);
  return {
    createdAtMs: raw.readUIntBE(1, 6),
    refreshedAtMs: raw.readUIntBE(7, 6),
    sub: raw.subarray(33, 33 + subLength).toString('utf8'),
  };
}
