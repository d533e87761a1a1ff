import { generateKeyPairSync } from 'node:crypto';

export type KeyAlg = 'ES256' | 'RS256' | 'EdDSA';

/** A new private key in PEM (PKCS#8) for an assertion alg; with `publicOnly`, its public half (SPKI). */
export function newKeyPem(alg: KeyAlg, publicOnly = false): string {
  const pair = alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
    : alg === 'RS256' ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : generateKeyPairSync('ed25519');
  return publicOnly
    ? pair.publicKey.export({ type: 'spki', format: 'pem' }).toString()
    : pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}
