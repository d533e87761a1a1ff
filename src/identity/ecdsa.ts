// The one spelling of an ES256 signature: the gateway signs (tokens, identity assertions) and accepts
// (its own tokens) only the low-S half of each pair.

/** The order n of P-256: an ECDSA signature (r, s) verifies as (r, n - s) too. */
const P256_ORDER = BigInt('0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551');
const P256_HALF_ORDER = P256_ORDER >> 1n;
/** An ES256 signature in a JWS: r and s, 32 bytes each, big-endian (RFC 7518 section 3.4). */
const ES256_SIGNATURE_BYTES = 64;

/**
 * Whether an ES256 JWS signature is in its one accepted spelling: 64 bytes with s at most n/2 (as
 * Bitcoin's BIP 62 and the Web Crypto/JOSE libraries that normalize have it). OpenSSL signs with either
 * half and verifies both, so without this every token would have a second, different string with the
 * same claims: a token denylist or cache keyed on the string could be stepped around.
 */
export function isLowSEs256(signature: Buffer): boolean {
  if (signature.length !== ES256_SIGNATURE_BYTES) return false;
  return BigInt(`0x${signature.subarray(32).toString('hex')}`) <= P256_HALF_ORDER;
}

/** The low-S spelling of an ES256 JWS signature (unchanged when it already is). */
export function lowSEs256(signature: Buffer): Buffer {
  if (signature.length !== ES256_SIGNATURE_BYTES || isLowSEs256(signature)) return signature;
  const s = P256_ORDER - BigInt(`0x${signature.subarray(32).toString('hex')}`);
  return Buffer.concat([signature.subarray(0, 32), Buffer.from(s.toString(16).padStart(64, '0'), 'hex')]);
}
