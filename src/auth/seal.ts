import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals small JSON values into opaque cookie values (AES-256-GCM under a derived key, the purpose as
 * associated data): the browser holds them but can neither read nor change them, and a value sealed for
 * one purpose (the sign-in state) does not open as another (the session handle).
 */
export class Sealer {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('a sealing key has 32 bytes');
  }

  /** Whether this sealer uses `key` (a reload keeps it then). */
  sameKey(key: Buffer): boolean {
    return this.key.equals(key);
  }

  seal(purpose: string, value: unknown): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(purpose, 'utf8'));
    const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** The value sealed for `purpose`, or undefined for anything else (forged, changed, another purpose, garbage). */
  open(purpose: string, sealed: string): unknown {
    if (!/^[A-Za-z0-9_-]{40,}$/.test(sealed)) return undefined;
    const raw = Buffer.from(sealed, 'base64url');
    if (raw.length < IV_BYTES + TAG_BYTES + 2) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(purpose, 'utf8'));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
      return JSON.parse(plain.toString('utf8')) as unknown;
    } catch {
      return undefined;
    }
  }
}

/** One cookie's value from a Cookie header (the first of that name), undefined when absent. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  let at = 0;
  while (at < header.length) {
    const end = header.indexOf(';', at);
    const part = header.slice(at, end < 0 ? header.length : end);
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      const v = part.slice(eq + 1).trim();
      return v.startsWith('"') && v.endsWith('"') && v.length >= 2 ? v.slice(1, -1) : v;
    }
    if (end < 0) break;
    at = end + 1;
  }
  return undefined;
}

/** A Cookie header without the cookies `own` names (undefined when none is left): the gateway's own stay with it. */
export function withoutCookies(header: string, own: (name: string) => boolean): string | undefined {
  const kept = header.split(';').filter((part) => {
    const eq = part.indexOf('=');
    return part.trim() !== '' && !own((eq < 0 ? part : part.slice(0, eq)).trim());
  });
  return kept.length === 0 ? undefined : kept.map((p) => p.trim()).join('; ');
}
