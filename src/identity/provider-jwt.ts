import { compactVerify } from 'jose';
import jwt from 'jsonwebtoken';
import type { IssuerAlg } from '../config/types.js';
import type { ProviderKey } from './issuer-keys.js';

/**
 * A compact JWS split and decoded, not yet verified: its `iss` chooses the issuer, and its claims are
 * judged before a key is looked for (an expired token never waits for a refetch). The signature is the
 * libraries' to check (signedByOneOf), over these same bytes.
 */
export interface DecodedToken {
  token: string;
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
}

const B64URL = /^[A-Za-z0-9_-]*$/;

/** Splits and decodes a compact JWS (three base64url parts, JSON objects); undefined when it is not one. */
export function decodeToken(token: string): DecodedToken | undefined {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first < 0 || second < 0 || token.indexOf('.', second + 1) >= 0) return undefined;
  const h = token.slice(0, first);
  const p = token.slice(first + 1, second);
  if (!B64URL.test(h) || !B64URL.test(p) || !B64URL.test(token.slice(second + 1))) return undefined;
  const header = json(h);
  const payload = json(p);
  if (!header || !payload) return undefined;
  return { token, header, payload };
}

function json(part: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether one of `keys` signed the token with `alg` (RFC 7515/7518), each key only with an algorithm
 * pinned to it. The claims are the caller's (checked before, on the same bytes). RS*, PS* and ES* are
 * jsonwebtoken's, synchronous with a KeyObject, so a token is verified at once when its key is cached;
 * EdDSA, which jsonwebtoken does not know, is jose's, a promise.
 */
export function signedByOneOf(token: string, alg: IssuerAlg, keys: readonly ProviderKey[]): boolean | Promise<boolean> {
  const usable = keys.filter((k) => k.algs.includes(alg));
  if (alg === 'EdDSA') return someAsync(usable, (k) => joseVerifies(token, alg, k));
  return usable.some((k) => jsonwebtokenVerifies(token, alg, k));
}

/**
 * jsonwebtoken checks the signature only: the algorithm is pinned (the token's header must name it),
 * and the time claims, which it would judge without the issuer's skew, are the caller's.
 */
function jsonwebtokenVerifies(token: string, alg: Exclude<IssuerAlg, 'EdDSA'>, key: ProviderKey): boolean {
  try {
    jwt.verify(token, key.key, { algorithms: [alg], ignoreExpiration: true, ignoreNotBefore: true });
    return true;
  } catch {
    return false;
  }
}

/** jose's JWS verification (no claims): the algorithm pinned, critical header parameters refused. */
function joseVerifies(token: string, alg: IssuerAlg, key: ProviderKey): Promise<boolean> {
  return compactVerify(token, key.key, { algorithms: [alg] }).then(() => true, () => false);
}

async function someAsync<T>(items: readonly T[], test: (item: T) => Promise<boolean>): Promise<boolean> {
  for (const item of items) if (await test(item)) return true;
  return false;
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
