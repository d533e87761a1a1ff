import { constants, createHmac, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { IssuerAlg } from '../../../src/config/types.js';
import { providerKey, type ProviderKey } from '../../../src/identity/issuer-keys.js';
import { decodeToken, signedByOneOf } from '../../../src/identity/provider-jwt.js';

const ALL: IssuerAlg[] = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
const CLAIMS = { iss: 'https://idp.test', sub: 'svc', aud: 'gateway', exp: 4_000_000_000 };

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const otherRsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec: Record<string, { privateKey: KeyObject; publicKey: KeyObject }> = {
  ES256: generateKeyPairSync('ec', { namedCurve: 'P-256' }),
  ES384: generateKeyPairSync('ec', { namedCurve: 'P-384' }),
  ES512: generateKeyPairSync('ec', { namedCurve: 'P-521' }),
};
const ed = generateKeyPairSync('ed25519');

function pairFor(alg: IssuerAlg): { privateKey: KeyObject; publicKey: KeyObject } {
  if (alg === 'EdDSA') return ed;
  return alg.startsWith('ES') ? ec[alg]! : rsa;
}

/** The provider's side, by hand on node:crypto (RFC 7518), so the test does not lean on the library it checks. */
function signed(alg: IssuerAlg, privateKey: KeyObject, header: Record<string, unknown> = {}, claims: Record<string, unknown> = CLAIMS): string {
  const input = `${b64({ alg, typ: 'JWT', ...header })}.${b64(claims)}`;
  const data = Buffer.from(input);
  const digest = alg === 'EdDSA' ? null : `sha${alg.slice(2)}`;
  const signature = alg === 'EdDSA' ? sign(null, data, privateKey)
    : alg.startsWith('RS') ? sign(digest, data, privateKey)
      : alg.startsWith('PS') ? sign(digest, data, { key: privateKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST })
        : sign(digest, data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}

function b64(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** The key as IssuerKeys makes it from the provider's JWK Set: its algorithms pinned (by its own alg when it names one). */
function keyOf(publicKey: KeyObject, alg?: IssuerAlg, allowed: IssuerAlg[] = ALL): ProviderKey {
  const [key] = providerKey({ ...publicKey.export({ format: 'jwk' }), kid: 'k1', ...(alg ? { alg } : {}) }, allowed);
  return key!;
}

describe('signedByOneOf (provider JWS signatures, by jsonwebtoken and jose)', () => {
  it.each(ALL)('%s: a signature of the key verifies; RS*, PS* and ES* at once (jsonwebtoken), EdDSA by a promise (jose)', async (alg) => {
    const { privateKey, publicKey } = pairFor(alg);
    const result = signedByOneOf(signed(alg, privateKey), alg, [keyOf(publicKey)]);
    if (alg === 'EdDSA') expect(result).toBeInstanceOf(Promise);
    else expect(result).toBe(true);
    expect(await result).toBe(true);
  });

  it.each(ALL)('%s: a signature of another key, or over other claims, is refused', async (alg) => {
    const { privateKey, publicKey } = pairFor(alg);
    const stranger = alg === 'EdDSA' ? generateKeyPairSync('ed25519') : alg.startsWith('ES') ? generateKeyPairSync('ec', { namedCurve: ec[alg]!.publicKey.asymmetricKeyDetails!.namedCurve! }) : otherRsa;
    expect(await signedByOneOf(signed(alg, stranger.privateKey), alg, [keyOf(publicKey)])).toBe(false);
    const [h, , s] = signed(alg, privateKey).split('.');
    expect(await signedByOneOf(`${h}.${b64({ ...CLAIMS, sub: 'admin' })}.${s}`, alg, [keyOf(publicKey)])).toBe(false);
  });

  it('each key verifies only with the algorithms pinned to it: its JWK alg, and those the issuer allows', async () => {
    const ps = signed('PS256', rsa.privateKey);
    expect(signedByOneOf(ps, 'PS256', [keyOf(rsa.publicKey, 'RS256')])).toBe(false);
    expect(signedByOneOf(ps, 'PS256', [keyOf(rsa.publicKey, undefined, ['RS256', 'PS384'])])).toBe(false);
    expect(signedByOneOf(ps, 'PS256', [keyOf(rsa.publicKey, 'PS256')])).toBe(true);
    expect(signedByOneOf(signed('RS256', rsa.privateKey), 'RS256', [keyOf(rsa.publicKey, 'PS256')])).toBe(false);
  });

  it('the token\'s header must name the algorithm verified with, and a signature of another algorithm fails', () => {
    const key = keyOf(rsa.publicKey);
    // A PS256 signature under a header that says RS256, and the reverse.
    const rsHeaderPsSignature = `${signed('RS256', rsa.privateKey).split('.').slice(0, 2).join('.')}.${signed('PS256', rsa.privateKey).split('.')[2]}`;
    expect(signedByOneOf(rsHeaderPsSignature, 'RS256', [key])).toBe(false);
    // Verified with RS256 while the header says RS384 (the caller passes the header's alg; the library holds it to it).
    expect(signedByOneOf(signed('RS384', rsa.privateKey), 'RS256', [key])).toBe(false);
  });

  it('alg none, HS256 keyed with the public key\'s PEM and an empty signature are refused', async () => {
    const key = keyOf(rsa.publicKey);
    const input = `${b64({ alg: 'none' })}.${b64(CLAIMS)}`;
    expect(signedByOneOf(`${input}.`, 'RS256', [key])).toBe(false);
    const hsInput = `${b64({ alg: 'HS256' })}.${b64(CLAIMS)}`;
    const pem = rsa.publicKey.export({ format: 'pem', type: 'spki' });
    expect(signedByOneOf(`${hsInput}.${createHmac('sha256', pem).update(hsInput).digest('base64url')}`, 'RS256', [key])).toBe(false);
    const [h, p] = signed('RS256', rsa.privateKey).split('.');
    expect(signedByOneOf(`${h}.${p}.`, 'RS256', [key])).toBe(false);
    const [eh, ep] = signed('EdDSA', ed.privateKey).split('.');
    expect(await signedByOneOf(`${eh}.${ep}.`, 'EdDSA', [keyOf(ed.publicKey)])).toBe(false);
  });

  it('an ECDSA signature in DER form or of the wrong length is refused (JWS has r||s of the curve\'s size)', () => {
    const key = keyOf(ec.ES256!.publicKey);
    const [h, p] = signed('ES256', ec.ES256!.privateKey).split('.');
    const der = sign('sha256', Buffer.from(`${h}.${p}`), ec.ES256!.privateKey);
    expect(signedByOneOf(`${h}.${p}.${der.toString('base64url')}`, 'ES256', [key])).toBe(false);
    const raw = Buffer.from(signed('ES256', ec.ES256!.privateKey).split('.')[2]!, 'base64url');
    expect(signedByOneOf(`${h}.${p}.${raw.subarray(0, 63).toString('base64url')}`, 'ES256', [key])).toBe(false);
  });

  it('a critical header parameter is refused by jose too (the callers refuse any crit before)', async () => {
    const token = signed('EdDSA', ed.privateKey, { crit: ['exp'], exp: 1 });
    expect(await signedByOneOf(token, 'EdDSA', [keyOf(ed.publicKey)])).toBe(false);
  });

  it('finds the key that signed among several (a rotation without kids), and none verifies with no key', async () => {
    const keys = [keyOf(otherRsa.publicKey), keyOf(rsa.publicKey)];
    expect(signedByOneOf(signed('RS256', rsa.privateKey), 'RS256', keys)).toBe(true);
    expect(signedByOneOf(signed('RS256', rsa.privateKey), 'RS256', [])).toBe(false);
    const edKeys = [keyOf(generateKeyPairSync('ed25519').publicKey), keyOf(ed.publicKey)];
    expect(await signedByOneOf(signed('EdDSA', ed.privateKey), 'EdDSA', edKeys)).toBe(true);
  });
});

describe('decodeToken', () => {
  it('splits a compact JWS into header and claims, and is undefined for anything else', () => {
    const token = signed('RS256', rsa.privateKey);
    expect(decodeToken(token)).toEqual({ token, header: { alg: 'RS256', typ: 'JWT' }, payload: CLAIMS });
    for (const bad of ['', 'a.b', `${token}.x`, `${b64([1])}.${b64(CLAIMS)}.x`, `${b64({ alg: 'RS256' })}.${b64('str')}.x`, `${b64({ alg: 'RS256' })}.${b64(CLAIMS)}.a+b`]) {
      expect(decodeToken(bad)).toBeUndefined();
    }
  });
});
