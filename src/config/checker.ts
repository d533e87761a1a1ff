import { nearest } from './suggest.js';
import { keyPath, NOWHERE, type KeyLocator } from './yaml-lines.js';

type Obj = Record<string, unknown>;

/** Keys whose values are never printed, whatever they hold (`tokens.signing.secret`, `admin.apiToken`, `bindPassword`). */
const SECRET_NAME = /secret|password|passphrase|token/i;
/** A value found is shown up to this many characters. */
const SHOWN_CHARACTERS = 40;

/**
 * Reads typed values out of parsed YAML, collecting a problem per bad key instead of stopping, and
 * warnings: what the gateway serves but the operator most likely did not mean (`config check` prints them).
 */
export class Checker {
  readonly problems: string[] = [];
  readonly warnings: string[] = [];

  /**
   * `locate`: where a key was written, when the text is known (see yaml-lines.ts); `root`: the values
   * read (variables substituted), for the value a problem found.
   */
  constructor(private readonly locate: KeyLocator = NOWHERE, private readonly root?: unknown) {}

  /**
   * `key (line L, column C) message; found V`: where the key was written when the file has it, so the
   * operator goes straight there, and for a bad value (`found`, or the scalar at the key when the message
   * says what it `must` be) the value read, shortened, hidden under a secret's key.
   */
  problem(key: string, message: string, found?: unknown): void {
    const where = this.locate.where(key);
    const value = found ?? (/^must\b/.test(message) ? scalarAt(this.root, key) : undefined);
    const seen = value === undefined ? undefined : shown(key, value);
    // A message that already quotes the value (`…, not "proxy.internal"`) needs it no second time.
    const tail = seen === undefined || message.includes(seen) ? '' : `; found ${seen}`;
    this.problems.push(`${key}${where ? ` (${where})` : ''} ${message}${tail}`);
  }

  warning(key: string, message: string): void {
    this.warnings.push(`${key} ${message}`);
  }

  /** The key with the line it was written on, `routes[1].allow.methods[0] (line 12)`, for a message that needs it. */
  at(key: string): string {
    const line = this.locate.line(key);
    return line === undefined ? key : `${key} (line ${line})`;
  }

  obj(key: string, value: unknown, required = false): Obj {
    if (value === undefined || value === null) {
      if (required) this.problem(key, 'is required');
      return {};
    }
    if (typeof value !== 'object' || Array.isArray(value)) {
      this.problem(key, 'must be a mapping', value);
      return {};
    }
    return value as Obj;
  }

  list(key: string, value: unknown): unknown[] {
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) {
      this.problem(key, 'must be a list', value);
      return [];
    }
    return value;
  }

  str(key: string, value: unknown, fallback?: string): string {
    if (value === undefined || value === null || value === '') {
      if (fallback === undefined) this.problem(key, 'is required');
      return fallback ?? '';
    }
    if (typeof value !== 'string') {
      this.problem(key, 'must be a string', value);
      return fallback ?? '';
    }
    return value;
  }

  int(key: string, value: unknown, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): number {
    if (value === undefined || value === null || value === '') return fallback;
    const n = typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min || n > max) {
      const what = min === 0 ? 'a non-negative integer' : min === 1 ? 'a positive integer' : `an integer of at least ${min}`;
      this.problem(key, `must be ${what}${max < Number.MAX_SAFE_INTEGER ? ` no greater than ${max}` : ''}`, value);
      return fallback;
    }
    return n;
  }

  bool(key: string, value: unknown, fallback: boolean): boolean {
    if (value === undefined || value === null || value === '') return fallback;
    if (value === true || value === 'true') return true;
    if (value === false || value === 'false') return false;
    this.problem(key, 'must be true or false', value);
    return fallback;
  }

  oneOf<T extends string>(key: string, value: unknown, allowed: readonly T[], fallback: T): T {
    if (value === undefined || value === null || value === '') return fallback;
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
    this.problem(key, `must be one of ${allowed.join(', ')}`, value);
    return fallback;
  }

  url(key: string, value: unknown, protocols: string[], fallback?: string): string {
    const raw = this.str(key, value, fallback);
    if (!raw) return raw;
    try {
      const u = new URL(raw);
      if (!protocols.includes(u.protocol)) this.problem(key, `must be a ${protocols.join(' or ')} URL`, raw);
    } catch {
      this.problem(key, 'must be a valid URL', raw);
    }
    return raw;
  }

  unknownKeys(key: string, value: Obj, known: readonly string[]): void {
    for (const k of Object.keys(value)) {
      if (known.includes(k)) continue;
      const hint = nearest(k, known);
      this.problem(`${key ? `${key}.` : ''}${k}`, hint ? `is not a known setting; did you mean ${hint}?` : 'is not a known setting');
    }
  }
}

/** The string, number or boolean a key names in the values read; undefined for anything else. */
function scalarAt(root: unknown, key: string): unknown {
  let node = root;
  for (const segment of keyPath(key)) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[segment];
  }
  return typeof node === 'string' || typeof node === 'number' || typeof node === 'boolean' ? node : undefined;
}

/**
 * A value found, as a problem shows it: a string quoted and cut short, a URL without its user and password, a
 * list or mapping by its kind, nothing at all under a key that names a secret.
 */
export function shown(key: string, value: unknown): string {
  const leaf = /([^.[\]]+)(?:\[\d+\])*$/.exec(key)?.[1] ?? key;
  if (SECRET_NAME.test(leaf)) return '(hidden)';
  if (Array.isArray(value)) return 'a list';
  if (value !== null && typeof value === 'object') return 'a mapping';
  if (typeof value !== 'string') return String(value);
  // What comes before `@` in a URL may be a password alone (`redis://s3cret@host`): none of it is shown.
  const text = value.replace(/^([a-z][a-z\d+.-]*:\/\/)[^/@]*@/i, '$1(hidden)@');
  const chars = [...text];
  return JSON.stringify(chars.length > SHOWN_CHARACTERS ? `${chars.slice(0, SHOWN_CHARACTERS).join('')}…` : text);
}
