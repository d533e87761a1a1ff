import { constants, verify as cryptoVerify } from 'node:crypto';
import type { IssuerAlg } from '../config/types.js';
import type { ProviderKey } from './issuers.js';

/** A compact JWS split and decoded, not yet verified. */
export interface DecodedToken {
  token: string;
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  /** `header.payload`: the bytes the signature covers. */
  signingInput: string;
  signature: Buffer;
}

const B64URL = /^[A-Za-z0-9_-]*$/;

/** Splits and decodes a compact JWS (three base64url parts, JSON objects); undefined when it is not one. */
export function decodeToken(token: string): DecodedToken | undefined {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first < 0 || second < 0 || token.indexOf('.', second + 1) >= 0) return undefined;
  const h = token.slice(0, first);
  const p = token.slice(first + 1, second);
  const s = token.slice(second + 1);
  if (!B64URL.test(h) || !B64URL.test(p) || !B64URL.test(s)) return undefined;
  const header = json(h);
  const payload = json(p);
  if (!header || !payload) return undefined;
  return { token, header, payload, signingInput: token.slice(0, second), signature: Buffer.from(s, 'base64url') };
}

function json(part: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

const DIGEST: Record<string, string> = { 256: 'sha256', 384: 'sha384', 512: 'sha512' };
const EC_SIZE: Record<string, number> = { ES256: 64, ES384: 96, ES512: 132 };

/**
 * Checks a JWS signature with one key and one algorithm (RFC 7518), synchronously: RS* PKCS#1 v1.5,
 * PS* PSS with the digest's salt length, ES* the raw r||s form of the right length, EdDSA Ed25519.
 * The algorithm is the one pinned for the key; the token's header only chooses among those.
 */
export function signatureValid(decoded: DecodedToken, alg: IssuerAlg, key: ProviderKey): boolean {
  if (!key.algs.includes(alg)) return false;
  const data = Buffer.from(decoded.signingInput, 'ascii');
  try {
    if (alg === 'EdDSA') return cryptoVerify(null, data, key.key, decoded.signature);
    const digest = DIGEST[alg.slice(2)]!;
    if (alg.startsWith('RS')) return cryptoVerify(digest, data, key.key, decoded.signature);
    if (alg.startsWith('PS')) return cryptoVerify(digest, data, { key: key.key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }, decoded.signature);
    if (decoded.signature.length !== EC_SIZE[alg]) return false;
    return cryptoVerify(digest, data, { key: key.key, dsaEncoding: 'ieee-p1363' }, decoded.signature);
  } catch {
    return false;
  }
}

/** The value at a dotted path of claims (`realm_access.roles`); a claim whose own name has a dot is found first. */
export function claimAt(payload: Record<string, unknown>, path: string): unknown {
  if (Object.hasOwn(payload, path)) return payload[path];
  let v: unknown = payload;
  for (const part of path.split('.')) {
    if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}
