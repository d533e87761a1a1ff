import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import jwt from 'jsonwebtoken';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { TokensConfig } from '../../src/config/types.js';
import { AccessTokenCodec } from '../../src/tokens/access-token.js';
import { loadKeys } from '../../src/tokens/keys.js';

const dir = mkdtempSync(join(tmpdir(), 'gw-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function pemFiles(type: 'rsa' | 'ec', name: string) {
  const { privateKey, publicKey } = type === 'rsa'
    ? generateKeyPairSync('rsa', { modulusLength: 2048 })
    : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const priv = join(dir, `${name}.key`);
  const pub = join(dir, `${name}.pub`);
  writeFileSync(priv, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(pub, publicKey.export({ type: 'spki', format: 'pem' }));
  return { priv, pub };
}

const base = { issuer: 'gw', audience: 'gw', accessTtlSeconds: 60, refreshTtlSeconds: 600, refreshReuseGraceSeconds: 0, verificationKeys: [] };
const codecFor = (tokens: TokensConfig, clock = new ManualClock()) =>
  new AccessTokenCodec(loadKeys(tokens), { issuer: tokens.issuer, audience: tokens.audience, ttlSeconds: tokens.accessTtlSeconds }, clock);

describe('access tokens', () => {
  it.each([
    ['RS256', pemFiles('rsa', 'rs')],
    ['ES256', pemFiles('ec', 'es')],
  ] as const)('signs and verifies with %s key files', (alg, files) => {
    const codec = codecFor({ ...base, signing: { alg, privateKeyFile: files.priv } });
    const { token } = codec.sign('alice', 'sid1', 'v1');
    expect(jwt.decode(token, { complete: true })!.header.alg).toBe(alg);
    expect(codec.verify(token)).toMatchObject({ sub: 'alice', sid: 'sid1' });
  });

  describe('ES256 signatures are low-S only (one spelling per token)', () => {
    // The order of P-256: (r, s) and (r, n - s) verify alike, so each signature has a second spelling.
    const N = BigInt('0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551');
    const sOf = (token: string) => BigInt(`0x${Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url').subarray(32).toString('hex')}`);
    const flipped = (token: string) => {
      const sig = Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url');
      const s = N - sOf(token);
      return `${token.slice(0, token.lastIndexOf('.'))}.${Buffer.concat([sig.subarray(0, 32), Buffer.from(s.toString(16).padStart(64, '0'), 'hex')]).toString('base64url')}`;
    };
    const files = pemFiles('ec', 'lows');

    it('signs with S at most n/2 (OpenSSL gives either half)', () => {
      const codec = codecFor({ ...base, signing: { alg: 'ES256', privateKeyFile: files.priv } });
      for (let i = 0; i < 64; i++) {
        const { token } = codec.sign('alice', `sid${i}`, 'v1');
        expect(sOf(token) <= N / 2n, `token ${i}`).toBe(true);
        expect(jwt.verify(token, readFileSync(files.pub), { algorithms: ['ES256'], ignoreExpiration: true })).toMatchObject({ sub: 'alice' });
      }
    });

    it('refuses the high-S spelling of a valid token (401 invalid_token), which the key itself would verify', () => {
      const codec = codecFor({ ...base, signing: { alg: 'ES256', privateKeyFile: files.priv } });
      for (let i = 0; i < 8; i++) {
        const { token } = codec.sign('alice', `sid${i}`, 'v1');
        const high = flipped(token);
        expect(high).not.toBe(token);
        // A second, equally valid signature of the same claims: jsonwebtoken (OpenSSL) accepts it.
        expect(jwt.verify(high, readFileSync(files.pub), { algorithms: ['ES256'], ignoreExpiration: true })).toMatchObject({ sub: 'alice' });
        const fresh = codecFor({ ...base, signing: { alg: 'ES256', privateKeyFile: files.priv } });
        expect(() => fresh.verify(high)).toThrow(expect.objectContaining({ code: 'invalid_token' }));
        expect(() => fresh.verify(high, { ignoreExpiration: true })).toThrow(expect.objectContaining({ code: 'invalid_token' }));
        expect(fresh.verify(token).sub).toBe('alice');
        expect(() => fresh.verify(high)).toThrow(expect.objectContaining({ code: 'invalid_token' }));
      }
    });

    it('refuses an ES256 signature of another length', () => {
      const codec = codecFor({ ...base, signing: { alg: 'ES256', privateKeyFile: files.priv } });
      const { token } = codec.sign('alice', 'sid', 'v1');
      const sig = Buffer.from(token.slice(token.lastIndexOf('.') + 1), 'base64url');
      for (const other of [sig.subarray(0, 63), Buffer.concat([Buffer.alloc(1), sig])]) {
        expect(() => codec.verify(`${token.slice(0, token.lastIndexOf('.'))}.${other.toString('base64url')}`)).toThrow(expect.objectContaining({ code: 'invalid_token' }));
      }
    });
  });

  it('refuses a key of the wrong type for its algorithm at start-up', () => {
    const ec = pemFiles('ec', 'wrong');
    expect(() => loadKeys({ ...base, signing: { alg: 'RS256', privateKeyFile: ec.priv } })).toThrow(/RS256 needs an RSA key/);
    expect(() => loadKeys({ ...base, signing: { alg: 'RS256', privateKeyFile: join(dir, 'missing.key') } })).toThrow(/key file not found/);
  });

  it('verifies tokens of a retired key kept in verificationKeys (rotation by kid)', () => {
    const oldSecret = 'o'.repeat(40);
    const clock = new ManualClock();
    const old = codecFor({ ...base, signing: { alg: 'HS256', secret: oldSecret } }, clock);
    const { token } = old.sign('alice', 'sid1', 'v1');
    const rotated = codecFor({ ...base, signing: { alg: 'HS256', secret: 'n'.repeat(40) }, verificationKeys: [{ alg: 'HS256', secret: oldSecret }] }, clock);
    expect(rotated.verify(token).sub).toBe('alice');
    const forgotten = codecFor({ ...base, signing: { alg: 'HS256', secret: 'n'.repeat(40) } }, clock);
    expect(() => forgotten.verify(token)).toThrow(expect.objectContaining({ code: 'invalid_token' }));
  });

  it('expires exactly at exp, judged by the injected clock', () => {
    const clock = new ManualClock(1_800_000_000_000);
    const codec = codecFor({ ...base, signing: { alg: 'HS256', secret: 'k'.repeat(40) } }, clock);
    const { token } = codec.sign('alice', 'sid1', 'v1');
    clock.advance(59_000);
    expect(codec.verify(token).sub).toBe('alice');
    clock.advance(1_000);
    expect(() => codec.verify(token)).toThrow(expect.objectContaining({ code: 'token_expired' }));
    expect(codec.verify(token, { ignoreExpiration: true }).sid).toBe('sid1');
  });
});
