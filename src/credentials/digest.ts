import * as crypto from 'node:crypto';

/**
 * SHA-256 of a string's UTF-8 bytes, base64url: one call (`crypto.hash`, Node ≥ 20.12) where the
 * runtime has it, the same digest through a Hash object where it does not. On the cached Basic path it
 * replaces Hash/Hmac objects and their Buffers, which cost several times the hashing itself.
 */
export const sha256: (text: string) => string = typeof (crypto as { hash?: unknown }).hash === 'function'
  ? (text) => crypto.hash('sha256', text, 'base64url')
  : (text) => crypto.createHash('sha256').update(text).digest('base64url');
