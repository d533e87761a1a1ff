import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha1Base64, sha256 } from '../../src/core/digest.js';

describe('sha256 (the one-call digest of the cached Basic path)', () => {
  it('is the SHA-256 of the UTF-8 bytes, base64url: the lockout keys already in a store keep their names', () => {
    for (const text of ['', 'alice', '5:alice9:127.0.0.1', 'Zoë:ünïcode ✓ 𝄞', 'x'.repeat(10_000)]) {
      expect(sha256(text)).toBe(createHash('sha256').update(text, 'utf8').digest('base64url'));
    }
  });
});

describe('sha1Base64 (a WebSocket handshake\'s accept value)', () => {
  it('is RFC 6455\'s example, and the SHA-1 of the UTF-8 bytes, base64', () => {
    expect(sha1Base64('dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11')).toBe('s3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
    for (const text of ['', 'key', 'Zoë ✓']) expect(sha1Base64(text)).toBe(createHash('sha1').update(text, 'utf8').digest('base64'));
  });
});
