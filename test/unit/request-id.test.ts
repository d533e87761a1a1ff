import { describe, expect, it } from 'vitest';
import { newRequestId } from '../../src/core/request-id.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newRequestId', () => {
  it('is a random version 4 UUID, a new one each time, across batches of random bytes', () => {
    const ids = Array.from({ length: 1000 }, () => newRequestId());
    for (const id of ids) expect(id).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('uses every hex digit in every free position (no position stuck)', () => {
    const seen = Array.from({ length: 36 }, () => new Set<string>());
    for (let n = 0; n < 2000; n++) [...newRequestId()].forEach((c, i) => seen[i]!.add(c));
    for (const [i, chars] of seen.entries()) {
      if ([8, 13, 18, 23].includes(i)) expect([...chars]).toEqual(['-']);
      else if (i === 14) expect([...chars]).toEqual(['4']);
      else if (i === 19) expect(chars.size).toBe(4);
      else expect(chars.size).toBe(16);
    }
  });
});
