import { FORMAT, LIVE } from './session-scripts.js';

export interface SessionRecord {
  sub: string;
  createdAtMs: number;
  refreshedAtMs: number;
  generation: number;
}

/** Reads a stored session (layout in session-scripts.ts); undefined if not one. */
export function readSessionRecord(raw: Buffer | null): SessionRecord | undefined {
  if (!raw || raw.length < 19 || raw[0] !== FORMAT) return undefined;
  const subLength = raw.readUInt16BE(17);
  return {
    createdAtMs: raw.readUIntBE(1, 6),
    refreshedAtMs: raw.readUIntBE(7, 6),
    generation: raw.readUInt32BE(13),
    sub: raw.subarray(19, 19 + subLength).toString('utf8'),
  };
}

/**
 * Reads a session's value in its user's hash (format 5, layout in session-scripts.ts); undefined if not one.
 * `legacyUntilS`: until when (s, Redis's clock) the session has a legacy record an earlier release may
 * revoke it through; 0 for none.
 */
export function readSessionValue(raw: Buffer): (Omit<SessionRecord, 'sub'> & { legacyUntilS: number }) | undefined {
  if (raw.length < 23 || raw[0] !== LIVE) return undefined;
  const tail = 23 + raw.readUInt16BE(21);
  return {
    createdAtMs: raw.readUIntBE(1, 6),
    refreshedAtMs: raw.readUIntBE(7, 6),
    generation: raw.readUInt32BE(13),
    legacyUntilS: raw.length >= tail + 4 ? raw.readUInt32BE(tail) : 0,
  };
}
