import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { compactVerify, createLocalJWKSet, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock.js';
import { ConfigError } from '../../../src/config/config-error.js';
import { AssertionSigner } from '../../../src/identity/assertion.js';
import { jwksDocument } from '../../../src/identity/jwks.js';
import { parseAssertionKeys, thumbprint } from '../../../src/identity/assertion-keys.js';
import { newKeyPem } from '../../support/assertion-keys.js';
import { isLowSEs256 } from '../../../src/identity/ecdsa.js';

const alice = { user: 'alice', via: 'basic', groups: ['admins', 'ops'], audience: 'reports' };

describe('assertion keys', () => {
  it('several keys in one file: the first private key signs, every key is published with its RFC 7638 thumbprint as kid', () => {
    const publicOnly = newKeyPem('ES256', true);
    const first = newKeyPem('ES256');
    const second = newKeyPem('ES256');
    const keys = parseAssertionKeys(`${publicOnly}\n${first}\n${second}`, 'ES256', 'k');
    expect(keys.published).toHaveLength(3);
    expect(keys.signing.kid).toBe(thumbprint(createPublicKey(first)));
    expect(keys.published[0]!.kid).toBe(thumbprint(createPublicKey(publicOnly)));
    for (const p of keys.published) {
      expect(p.jwk).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: p.kid });
      // Nothing private is published.
      expect(p.jwk).not.toHaveProperty('d');
    }
  });

  it('openssl ecparam -genkey output (EC PARAMETERS + SEC1 key) reads', () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const sec1 = privateKey.export({ type: 'sec1', format: 'pem' }).toString();
    const pem = `-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n${sec1}`;
    expect(parseAssertionKeys(pem, 'ES256', 'k').published).toHaveLength(1);
  });

  it.each([
    ['a key of another type than alg', (): string => newKeyPem('EdDSA'), 'ES256', /key 1 is not an EC P-256 key/],
    ['an RSA key below 2048 bits', (): string => generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), 'RS256', /1024 bits/],
    ['no key at all', (): string => 'hello', 'ES256', /holds no PEM key/],
    ['public keys only', (): string => newKeyPem('EdDSA', true), 'EdDSA', /holds no private key/],
    ['the same key twice', (): string => { const k = newKeyPem('EdDSA'); return k + k; }, 'EdDSA', /key 2 repeats an earlier key/],
    ['a certificate', (): string => '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', 'ES256', /CERTIFICATE block/],
  ] as const)('refuses %s, naming the file', (_name, pem, alg, message) => {
    expect(() => parseAssertionKeys(pem(), alg, 'identity.assertion.keyFile (/k.pem)')).toThrow(ConfigError);
    expect(() => parseAssertionKeys(pem(), alg, 'identity.assertion.keyFile (/k.pem)')).toThrow(message);
  });
});

describe('identity assertions', () => {
  it.each(['ES256', 'RS256', 'EdDSA'] as const)('%s: a standard library (jose) verifies it against the published JWK Set', async (alg) => {
    const keys = parseAssertionKeys(newKeyPem(alg), alg, 'k');
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 22, 0, 0));
    const signer = new AssertionSigner(keys, { issuer: 'auth-gateway', ttlSeconds: 60 }, clock);
    const jwt = signer.assertion(alice);
    const jwks = createLocalJWKSet(JSON.parse(jwksDocument(keys).body));
    const { payload, protectedHeader } = await jwtVerify(jwt, jwks, {
      issuer: 'auth-gateway', audience: 'reports', algorithms: [alg], currentDate: new Date(clock.now()),
    });
    expect(protectedHeader).toEqual({ alg, typ: 'JWT', kid: keys.signing.kid });
    const iat = clock.now() / 1000;
    expect(payload).toEqual({ iss: 'auth-gateway', sub: 'alice', aud: 'reports', groups: ['admins', 'ops'], via: 'basic', iat, exp: iat + 60 });
  });

  it('ES256 assertions carry the low-S signature (the one spelling the gateway and strict verifiers accept)', () => {
    const signer = new AssertionSigner(parseAssertionKeys(newKeyPem('ES256'), 'ES256', 'k'), { issuer: 'i', ttlSeconds: 60 }, new ManualClock());
    // OpenSSL picks either half at random: 64 signatures without normalizing hold a high S almost surely (1 - 2^-64).
    for (let i = 0; i < 64; i++) {
      const jwt = signer.assertion({ ...alice, user: `user-${i}` });
      expect(isLowSEs256(Buffer.from(jwt.split('.')[2]!, 'base64url'))).toBe(true);
    }
  });

  it('is reused for the same user, via, groups and audience until shortly before expiry, then replaced', () => {
    const clock = new ManualClock();
    const signer = new AssertionSigner(parseAssertionKeys(newKeyPem('ES256'), 'ES256', 'k'), { issuer: 'i', ttlSeconds: 60 }, clock);
    const first = signer.assertion(alice);
    clock.advance(49_000);
    expect(signer.assertion({ ...alice, groups: [...alice.groups] })).toBe(first);
    // Another audience, other groups, another via: each its own.
    expect(signer.assertion({ ...alice, audience: 'billing' })).not.toBe(first);
    expect(signer.assertion({ ...alice, groups: ['admins'] })).not.toBe(first);
    expect(signer.assertion({ ...alice, via: 'bearer' })).not.toBe(first);
    // 10 s before exp: a fresh one (ES256 signatures are randomized, so a new one always differs).
    clock.advance(1000);
    const second = signer.assertion(alice);
    expect(second).not.toBe(first);
    const claims = JSON.parse(Buffer.from(second.split('.')[1]!, 'base64url').toString());
    expect(claims.exp - claims.iat).toBe(60);
    expect(signer.assertion(alice)).toBe(second);
  });

  it('the cache is bounded: the oldest entry goes first', () => {
    const clock = new ManualClock();
    const signer = new AssertionSigner(parseAssertionKeys(newKeyPem('EdDSA'), 'EdDSA', 'k'), { issuer: 'i', ttlSeconds: 60, maxCached: 2 }, clock);
    const a = signer.assertion({ ...alice, user: 'a' });
    signer.assertion({ ...alice, user: 'b' });
    signer.assertion({ ...alice, user: 'c' });
    // Ed25519 is deterministic: a re-signed assertion with the same claims is the same string, so move the clock.
    clock.advance(1000);
    expect(signer.assertion({ ...alice, user: 'a' })).not.toBe(a);
  });

  it('a signature does not verify under another key of the set (kid decides)', async () => {
    const other = newKeyPem('ES256');
    const keys = parseAssertionKeys(newKeyPem('ES256') + other, 'ES256', 'k');
    const jwt = new AssertionSigner(keys, { issuer: 'i', ttlSeconds: 60 }, new ManualClock()).assertion(alice);
    await expect(compactVerify(jwt, createPublicKey(other))).rejects.toThrow();
  });
});
