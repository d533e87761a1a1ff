import { createHash, createHmac, createPrivateKey, createPublicKey, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../config/config-error.js';
import type { FileCheck } from '../config/inspection.js';
import type { SigningKeyConfig, TokensConfig, VerificationKeyConfig } from '../config/types.js';

type Alg = 'HS256' | 'RS256' | 'ES256';

interface VerificationKey {
  kid: string;
  alg: Alg;
  key: KeyObject;
}

interface SigningKey extends VerificationKey {}

export interface KeySet {
  signing: SigningKey;
  /** Every key a token may be verified with, by kid (the signing key's public half included). */
  byKid: Map<string, VerificationKey>;
}

/**
 * Builds the KeyObjects once at start-up: a string secret passed to jsonwebtoken on every call would
 * make each HS256 verify try createPublicKey first (30-50x slower).
 */
export function loadKeys(tokens: TokensConfig): KeySet {
  const problems: string[] = [];
  const signing = attempt(problems, 'tokens.signing', () => signingKey(tokens.signing));
  const byKid = new Map<string, VerificationKey>();
  if (signing) byKid.set(signing.kid, { kid: signing.kid, alg: signing.alg, key: verifyHalf(signing) });
  tokens.verificationKeys.forEach((k, i) => {
    const key = attempt(problems, `tokens.verificationKeys[${i}]`, () => verificationKey(k));
    if (!key) return;
    if (byKid.has(key.kid)) problems.push(`tokens.verificationKeys[${i}].kid "${key.kid}" is used by another key`);
    else byKid.set(key.kid, key);
  });
  if (problems.length > 0 || !signing) throw new ConfigError(problems);
  return { signing, byKid };
}

function signingKey(c: SigningKeyConfig): SigningKey {
  if (c.alg === 'HS256') return hmacKey(c.secret, c.kid);
  const key = createPrivateKey(readFileSync(c.privateKeyFile));
  checkKeyType(c.alg, key);
  return { alg: c.alg, key, kid: c.kid ?? derivedKid(c.alg, spki(createPublicKey(key))) };
}

function verificationKey(c: VerificationKeyConfig): VerificationKey {
  if (c.alg === 'HS256') return hmacKey(c.secret, c.kid);
  const key = createPublicKey(readFileSync(c.publicKeyFile));
  checkKeyType(c.alg, key);
  return { alg: c.alg, key, kid: c.kid ?? derivedKid(c.alg, spki(key)) };
}

/** An HS256 key signs and verifies alike. */
function hmacKey(secret: string, kid: string | undefined): VerificationKey {
  const material = Buffer.from(secret, 'utf8');
  return { alg: 'HS256', key: createSecretKey(material), kid: kid ?? derivedKid('HS256', material) };
}

function verifyHalf(k: SigningKey): KeyObject {
  return k.alg === 'HS256' ? k.key : createPublicKey(k.key);
}

function checkKeyType(alg: 'RS256' | 'ES256', key: KeyObject): void {
  if (alg === 'RS256' && key.asymmetricKeyType !== 'rsa') throw new Error('RS256 needs an RSA key');
  if (alg === 'ES256' && (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')) {
    throw new Error('ES256 needs an EC P-256 key');
  }
}

/**
 * The key the `uv` claim (and the session's credential version in the store) is an HMAC under, so a
 * token says nothing checkable about the user's htpasswd line. Every instance of a deployment derives
 * the same key from the same configured material, as for refresh tokens: `tokens.refreshSecret` when
 * set, else the signing key (see refreshKey), under its own HKDF label.
 */
export function credentialVersionKey(refreshSecret: string | undefined, signingKey: KeyObject): Buffer {
  return derivedKey(refreshSecret, signingKey, 'credential version v1');
}

/**
 * A 32-byte key of its own for `label`, derived (HKDF-SHA256) from `tokens.refreshSecret` when set, else
 * the signing key: every instance of a deployment derives the same one (the sign-in cookies use it).
 */
export function derivedKey(refreshSecret: string | undefined, signingKey: KeyObject, label: string): Buffer {
  const material = refreshSecret !== undefined
    ? Buffer.from(refreshSecret, 'utf8')
    : signingKey.type === 'secret' ? signingKey.export() : signingKey.export({ type: 'pkcs8', format: 'der' });
  return Buffer.from(hkdfSync('sha256', material, 'auth-gateway', label, 32));
}

/** The user's credential version as tokens and sessions carry it (undefined: the user is gone). */
function keyedCredentialVersion(key: Buffer, version: string | undefined): string | undefined {
  return version === undefined ? undefined : createHmac('sha256', key).update(version).digest('base64url').slice(0, 16);
}

/**
 * keyedCredentialVersion under one key, each version's HMAC made once (a bearer request reads its user's
 * on every request). Bounded: past `max` versions (users changed that often) it starts again.
 */
export function keyedCredentialVersions(key: Buffer, max = 100_000): (version: string | undefined) => string | undefined {
  const keyed = new Map<string, string>();
  return (version) => {
    if (version === undefined) return undefined;
    let mac = keyed.get(version);
    if (mac === undefined) {
      if (keyed.size >= max) keyed.clear();
      mac = keyedCredentialVersion(key, version)!;
      keyed.set(version, mac);
    }
    return mac;
  };
}

/** A kid that changes whenever the key does, so rotation needs no bookkeeping; it reveals nothing of a secret. */
function derivedKid(alg: Alg, material: Buffer): string {
  return createHash('sha256').update(`auth-gateway kid\0${alg}\0`).update(material).digest('base64url').slice(0, 16);
}

function spki(key: KeyObject): Buffer {
  return key.export({ type: 'spki', format: 'der' });
}

function attempt<T>(problems: string[], key: string, build: () => T): T | undefined {
  try {
    return build();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    problems.push(`${key}: ${e.code === 'ENOENT' ? `key file not found (${e.path})` : e.message}`);
    return undefined;
  }
}

/** The signing and verification keys, at load time. */
export const tokenKeysCheck: FileCheck = {
  keys: ['tokens.signing', 'tokens.verificationKeys'],
  applies: () => true,
  run: (config) => void loadKeys(config.tokens),
};
