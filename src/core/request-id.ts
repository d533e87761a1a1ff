import { randomFillSync } from 'node:crypto';

/** Random bytes for this many ids are drawn at once. */
const BATCH = 128;
const random = Buffer.alloc(16 * BATCH);
let used = BATCH;
/** The character codes of the id being written: hex digits between dashes that never move. */
const codes: number[] = new Array<number>(36).fill(0x2d);
const HEX = Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
/** Where each of the 16 bytes' two hex digits go (the dashes sit at 8, 13, 18 and 23). */
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/**
 * A new request id: a random (version 4) UUID in lower-case hex, as crypto.randomUUID() makes it, but
 * made in one piece. randomUUID() joins its 36 characters from some twenty pieces; the headers the id
 * then travels in (the response's, the upstream request's) check their value with a regular expression,
 * which must first copy such a string into one: a cost on every request. String.fromCharCode makes the
 * flat string in the engine itself (a Buffer's toString is a call into Node's C++ for 36 bytes).
 */
export function newRequestId(): string {
  if (used === BATCH) {
    randomFillSync(random);
    used = 0;
  }
  const from = 16 * used++;
  for (let i = 0; i < 16; i++) {
    let byte = random[from + i]!;
    if (i === 6) byte = (byte & 0x0f) | 0x40;
    else if (i === 8) byte = (byte & 0x3f) | 0x80;
    const at = AT[i]!;
    codes[at] = HEX[byte >> 4]!;
    codes[at + 1] = HEX[byte & 0x0f]!;
  }
  return String.fromCharCode.apply(null, codes);
}
