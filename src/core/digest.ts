import * as crypto from 'node:crypto';

/**
 * SHA-256 of a string's UTF-8 bytes, base64url: one call (`crypto.hash`, Node ≥ 20.12) where the
 * runtime has it, the same digest through a Hash object where it does not. On the cached Basic path it
 * replaces Hash/Hmac objects and their Buffers, which cost several times the hashing itself.
 */
export const sha256 = digestOf('sha256', 'base64url');

/** SHA-1, base64 (a WebSocket handshake's Sec-WebSocket-Accept), the same way. */
export const sha1Base64 = digestOf('sha1', 'base64');

function digestOf(algorithm: string, encoding: 'base64' | 'base64url'): (text: string) => string {
  return typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (text) => crypto.hash(algorithm, text, encoding)
    : (text) => crypto.createHash(algorithm).update(text).digest(encoding);
}
