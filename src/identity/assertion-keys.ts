import { createHash, createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/config-error.js';
import type { FileCheck } from '../config/inspection.js';

export type AssertionAlg = 'ES256' | 'RS256' | 'EdDSA';

/** A public key as published in the JWK Set. */
interface PublishedKey {
  kid: string;
  jwk: JsonWebKey & { kid: string; alg: AssertionAlg; use: 'sig' };
}

/** The keys of an assertion key file: the first private key signs, every key is published. */
export interface AssertionKeys {
  alg: AssertionAlg;
  signing: { kid: string; key: KeyObject };
  published: PublishedKey[];
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n[\s\S]*?-----END \1-----/g;
const PRIVATE = new Set(['PRIVATE KEY', 'EC PRIVATE KEY', 'RSA PRIVATE KEY']);
const PUBLIC = new Set(['PUBLIC KEY', 'RSA PUBLIC KEY']);
/** openssl ecparam -genkey writes these beside the key; they carry no key. */
const IGNORED = new Set(['EC PARAMETERS']);
const MIN_RSA_BITS = 2048;

/**
 * Reads a PEM file holding one or more keys for rotation. The first private key signs; every key in
 * the file (private ones by their public half, and PUBLIC KEY blocks, e.g. a retired key whose private
 * half is gone) is published until it is removed from the file. Each key's kid is its RFC 7638 JWK
 * thumbprint, so a kid changes exactly when the key does and needs no bookkeeping. Every key must fit
 * `alg`: ES256 an EC P-256 key, RS256 an RSA key of at least 2048 bits, EdDSA an Ed25519 key.
 */
export function loadAssertionKeys(file: string, alg: AssertionAlg, configKey = 'identity.assertion.keyFile'): AssertionKeys {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`${configKey}: ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  return parseAssertionKeys(text, alg, `${configKey} (${file})`);
}

export function parseAssertionKeys(pem: string, alg: AssertionAlg, where: string): AssertionKeys {
  const problems: string[] = [];
  const published: PublishedKey[] = [];
  let signing: AssertionKeys['signing'] | undefined;
  let n = 0;
  for (const match of pem.matchAll(BLOCK)) {
    const label = match[1]!;
    if (IGNORED.has(label)) continue;
    n++;
    if (!PRIVATE.has(label) && !PUBLIC.has(label)) {
      problems.push(`${where}: key ${n} is a ${label} block, not a private or public key`);
      continue;
    }
    let key: KeyObject;
    try {
      key = PRIVATE.has(label) ? createPrivateKey(match[0]) : createPublicKey(match[0]);
    } catch (err) {
      problems.push(`${where}: key ${n} cannot be read: ${(err as Error).message}`);
      continue;
    }
    const misfit = checkKeyType(alg, key);
    if (misfit) {
      problems.push(`${where}: key ${n} ${misfit}`);
      continue;
    }
    const pub = key.type === 'private' ? createPublicKey(key) : key;
    const kid = thumbprint(pub);
    if (published.some((p) => p.kid === kid)) {
      problems.push(`${where}: key ${n} repeats an earlier key`);
      continue;
    }
    published.push({ kid, jwk: { ...pub.export({ format: 'jwk' }), kid, alg, use: 'sig' } });
    if (!signing && key.type === 'private') signing = { kid, key };
  }
  if (n === 0) problems.push(`${where}: holds no PEM key`);
  else if (!signing && problems.length === 0) problems.push(`${where}: holds no private key (the first private key signs)`);
  if (problems.length > 0 || !signing) throw new ConfigError(problems);
  return { alg, signing, published };
}

function checkKeyType(alg: AssertionAlg, key: KeyObject): string | undefined {
  const type = key.asymmetricKeyType;
  if (alg === 'ES256') return type === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1' ? undefined : 'is not an EC P-256 key (ES256)';
  if (alg === 'EdDSA') return type === 'ed25519' ? undefined : 'is not an Ed25519 key (EdDSA)';
  if (type !== 'rsa') return 'is not an RSA key (RS256)';
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  return bits >= MIN_RSA_BITS ? undefined : `is an RSA key of ${bits} bits; RS256 needs at least ${MIN_RSA_BITS}`;
}

/** RFC 7638: SHA-256 over the required members in lexicographic order, base64url. */
export function thumbprint(pub: KeyObject): string {
  const jwk = pub.export({ format: 'jwk' });
  const members = jwk.kty === 'EC' ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y }
    : jwk.kty === 'RSA' ? { e: jwk.e, kty: jwk.kty, n: jwk.n }
      : { crv: jwk.crv, kty: jwk.kty, x: jwk.x };
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url');
}

/** The identity assertions' key file, at load time. */
export const assertionKeysCheck: FileCheck = {
  keys: ['identity.assertion'],
  applies: (config) => Boolean(config.identity.assertion?.keyFile),
  run: (config) => void loadAssertionKeys(config.identity.assertion!.keyFile, config.identity.assertion!.alg),
};
