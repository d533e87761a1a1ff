import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TokenMap } from '../../src/core/token-map.js';

const token = (signature = randomBytes(32).toString('base64url')) => `${randomBytes(30).toString('base64url')}.${randomBytes(200).toString('base64url')}.${signature}`;

describe('TokenMap (the caches of verified tokens)', () => {
  it('answers for the very token kept, also when it comes as a new string (a request\'s header, sliced)', () => {
    const map = new TokenMap<number>();
    const t = token();
    map.set(t, 1);
    const again = `Bearer ${t}`.slice(7);
    expect(map.get(again)).toBe(1);
    expect(map.has(again)).toBe(true);
    expect(map.get(token())).toBeUndefined();
    map.delete(again);
    expect(map.has(t)).toBe(false);
    expect(map.size).toBe(0);
  });

  it('a token that copies a kept one\'s signature (its tail) is a miss, and deleting it leaves the kept one', () => {
    const map = new TokenMap<string>();
    const signature = randomBytes(32).toString('base64url');
    const kept = token(signature);
    const forged = token(signature);
    map.set(kept, 'kept');
    expect(map.get(forged)).toBeUndefined();
    expect(map.has(forged)).toBe(false);
    map.delete(forged);
    expect(map.get(kept)).toBe('kept');
    // One differing character anywhere else is another token.
    expect(map.get(`x${kept.slice(1)}`)).toBeUndefined();
    expect(map.get(kept.slice(0, 100) + (kept[100] === 'a' ? 'b' : 'a') + kept.slice(101))).toBeUndefined();
  });

  it('keeps short strings whole, and drops the oldest first', () => {
    const map = new TokenMap<number>();
    map.set('a', 1);
    map.set('abcdefghijklmnopqrstuvwxyz', 2);
    map.set('bcdefghijklmnopqrstuvwxyz', 3);
    expect([map.get('a'), map.get('abcdefghijklmnopqrstuvwxyz'), map.get('bcdefghijklmnopqrstuvwxyz')]).toEqual([1, undefined, 3]);
    // Those two share their last 22 characters: the later one took the slot.
    expect(map.size).toBe(2);
    map.deleteOldest();
    expect(map.get('a')).toBeUndefined();
    expect(map.get('bcdefghijklmnopqrstuvwxyz')).toBe(3);
    map.clear();
    expect(map.size).toBe(0);
    map.deleteOldest();
  });
});
