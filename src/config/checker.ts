import { nearest } from './suggest.js';

type Obj = Record<string, unknown>;

/**
 * Reads typed values out of parsed YAML, collecting a problem per bad key instead of stopping, and
 * warnings: what the gateway serves but the operator most likely did not mean (`config check` prints them).
 */
export class Checker {
  readonly problems: string[] = [];
  readonly warnings: string[] = [];

  /** `locate`: the line a key was written on, when the text is known (see yaml-lines.ts). */
  constructor(private readonly locate: (key: string) => number | undefined = () => undefined) {}

  problem(key: string, message: string): void {
    this.problems.push(`${key} ${message}`);
  }

  warning(key: string, message: string): void {
    this.warnings.push(`${key} ${message}`);
  }

  /** The key with the line it was written on, `routes[1].allow.methods[0] (line 12)`, for a message that needs it. */
  at(key: string): string {
    const line = this.locate(key);
    return line === undefined ? key : `${key} (line ${line})`;
  }

  obj(key: string, value: unknown, required = false): Obj {
    if (value === undefined || value === null) {
      if (required) this.problem(key, 'is required');
      return {};
    }
    if (typeof value !== 'object' || Array.isArray(value)) {
      this.problem(key, 'must be a mapping');
      return {};
    }
    return value as Obj;
  }

  list(key: string, value: unknown): unknown[] {
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) {
      this.problem(key, 'must be a list');
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
      this.problem(key, 'must be a string');
      return fallback ?? '';
    }
    return value;
  }

  int(key: string, value: unknown, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): number {
    if (value === undefined || value === null || value === '') return fallback;
    const n = typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min || n > max) {
      const what = min === 0 ? 'a non-negative integer' : min === 1 ? 'a positive integer' : `an integer of at least ${min}`;
      this.problem(key, `must be ${what}${max < Number.MAX_SAFE_INTEGER ? ` no greater than ${max}` : ''}`);
      return fallback;
    }
    return n;
  }

  bool(key: string, value: unknown, fallback: boolean): boolean {
    if (value === undefined || value === null || value === '') return fallback;
    if (value === true || value === 'true') return true;
    if (value === false || value === 'false') return false;
    this.problem(key, 'must be true or false');
    return fallback;
  }

  oneOf<T extends string>(key: string, value: unknown, allowed: readonly T[], fallback: T): T {
    if (value === undefined || value === null || value === '') return fallback;
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
    this.problem(key, `must be one of ${allowed.join(', ')}`);
    return fallback;
  }

  url(key: string, value: unknown, protocols: string[], fallback?: string): string {
    const raw = this.str(key, value, fallback);
    if (!raw) return raw;
    try {
      const u = new URL(raw);
      if (!protocols.includes(u.protocol)) this.problem(key, `must be a ${protocols.join(' or ')} URL`);
    } catch {
      this.problem(key, 'must be a valid URL');
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
