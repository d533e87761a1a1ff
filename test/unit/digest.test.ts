import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256 } from '../../src/credentials/digest.js';

describe('sha256 (the one-call digest of the cached Basic path)', () => {
  it('is the SHA-256 of the UTF-8 bytes, base64url: the lockout keys already in a store keep their names', () => {
    for (const text of ['', 'alice', '5:alice9:127.0.0.1', 'Zoë:ünïcode ✓ 𝄞', 'x'.repeat(10_000)]) {
      expect(sha256(text)).toBe(createHash('sha256').update(text, 'utf8').digest('base64url'));
    }
  });
});
