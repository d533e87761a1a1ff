import { createHash, randomBytes } from 'node:crypto';

/** `<sid>.<secret>`: 128-bit session id and 256-bit secret, base64url. Only its SHA-256 is stored. */
const SHAPE = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;

export interface RefreshToken {
  token: string;
  sid: string;
  hash: string;
}

export function newSessionId(): string {
  return randomBytes(16).toString('base64url');
}

export function newRefreshToken(sid: string): RefreshToken {
  const token = `${sid}.${randomBytes(32).toString('base64url')}`;
  return { token, sid, hash: hashRefreshToken(token) };
}

/** The session id and hash of a well-formed refresh token, or undefined. */
export function parseRefreshToken(token: string): RefreshToken | undefined {
  const m = SHAPE.exec(token);
  return m ? { token, sid: m[1]!, hash: hashRefreshToken(token) } : undefined;
}

export function hashRefreshToken(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}
