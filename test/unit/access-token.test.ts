import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
    expect(() => codec.verify(token)).toThrow(expect.objectContaining({ code: 'token_expired', status: 401 }));
    expect(codec.verify(token, { ignoreExpiration: true }).sid).toBe('sid1');
  });
});
