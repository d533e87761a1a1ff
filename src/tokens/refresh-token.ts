import { createHmac, hkdfSync, timingSafeEqual, type KeyObject } from 'node:crypto';

/**
 * `<sid>.<secret>`: the session id (45 characters: the user's tag, a copy, 128 random bits, see
 * user-index.ts; 22 for a session made before), then 32 bytes base64url: the token's generation (4 bytes,
 * big-endian) and HMAC-SHA-256(refresh key, sid ‖ generation) cut to 28 bytes.
 *
 * A session's tokens are derived, not stored: generation n+1 is the successor of generation n, and the
 * store keeps only the session's current generation. So a refresh retried with the same token gets the
 * same successor (a lost answer costs nothing), and reuse detection is a comparison of two integers.
 * Redis holds no token and no digest of one; a token needs the refresh key, which lives only in the
 * gateways' configuration (see refreshKey).
 *
 * A session created over a verified client certificate is bound to it (RFC 8705 §3): its refresh tokens
 * are `<sid>.<secret>.<x5t#S256>`, the certificate's thumbprint under the MAC too, so every successor
 * carries the binding and a token cannot be unbound or rebound without the refresh key.
 */
const SHAPE = /^([A-Za-z0-9_-]{22}(?:[01][A-Za-z0-9_-]{22})?)\.([A-Za-z0-9_-]{43})(?:\.([A-Za-z0-9_-]{43}))?$/;
const MAC_BYTES = 28;
/** A token of the last generation has no successor (at one refresh a minute: 8,000 years). */
export const MAX_GENERATION = 2 ** 32 - 1;

export interface RefreshToken {
  token: string;
  sid: string;
  generation: number;
  /** The x5t#S256 of the client certificate the session is bound to; undefined: unbound. */
  thumbprint: string | undefined;
}

/** The refresh token of a session's generation (bound to a certificate's thumbprint, or not). */
export function refreshTokenFor(key: Buffer, sid: string, generation: number, thumbprint?: string): RefreshToken {
  const secret = Buffer.alloc(4 + MAC_BYTES);
  secret.writeUInt32BE(generation >>> 0, 0);
  mac(key, sid, generation, thumbprint).copy(secret, 4);
  const bound = thumbprint === undefined ? '' : `.${thumbprint}`;
  return { token: `${sid}.${secret.toString('base64url')}${bound}`, sid, generation, thumbprint };
}

/**
 * The session id and generation of a refresh token this gateway issued, or undefined: a malformed or
 * forged token never reaches the store (and takes the same time whichever session it names).
 */
export function parseRefreshToken(key: Buffer, token: string): RefreshToken | undefined {
  const m = SHAPE.exec(token);
  if (!m) return undefined;
  const secret = Buffer.from(m[2]!, 'base64url');
  if (secret.length !== 4 + MAC_BYTES) return undefined;
  const generation = secret.readUInt32BE(0);
  const thumbprint = m[3];
  if (!timingSafeEqual(secret.subarray(4), mac(key, m[1]!, generation, thumbprint))) return undefined;
  return { token, sid: m[1]!, generation, thumbprint };
}

function mac(key: Buffer, sid: string, generation: number, thumbprint: string | undefined): Buffer {
  const g = Buffer.alloc(4);
  g.writeUInt32BE(generation >>> 0, 0);
  const h = createHmac('sha256', key).update('refresh\0').update(sid).update(g);
  if (thumbprint !== undefined) h.update('\0x5t#S256\0').update(thumbprint);
  return h.digest().subarray(0, MAC_BYTES);
}

/**
 * The key refresh tokens are derived with: from `tokens.refreshSecret` when set, else from the signing
 * key's secret or private key (every instance has it). Changing it ends every session at its next
 * refresh, which is why a deployment that rotates signing keys sets refreshSecret.
 */
export function refreshKey(refreshSecret: string | undefined, signingKey: KeyObject): Buffer {
  const material = refreshSecret !== undefined
    ? Buffer.from(refreshSecret, 'utf8')
    : signingKey.type === 'secret' ? signingKey.export() : signingKey.export({ type: 'pkcs8', format: 'der' });
  return Buffer.from(hkdfSync('sha256', material, 'auth-gateway', 'refresh tokens v1', 32));
}
