import type { Checker } from './checker.js';
import { SETTINGS, type Setting, type SettingKey } from './defaults.js';

/**
 * A setting is declared once, in the settings table (defaults.ts): its type, default, bounds and
 * meaning. The plain ones (integers, booleans, strings, paths, enumerations) need nothing more: their
 * TypeScript type (`Scalars<'lockout'>`) and their reading (`readScalars(c, 'lockout', raw)`) follow
 * from the table. What a reader still writes by hand is only what the table cannot say: lists,
 * mappings, a value of two types (`trustProxy`), checks between settings.
 */

type Settings = typeof SETTINGS;

/** The kinds of entry the table types by itself, by the `type` the reference shows. */
type StringKind = 'string' | 'path' | 'secret' | 'header name';

/** What a scalar setting reads as; `never` for what a reader reads by hand (lists, mappings, URLs, mixed types). */
type ValueOf<S> =
  S extends { readonly values: readonly (infer V)[] } ? V
    : S extends { readonly type: 'integer' } ? number
      : S extends { readonly type: 'boolean' } ? boolean
        : S extends { readonly type: StringKind } ? string
          : never;

/** `R` when `K` is `P.R` with R one level deep (no further `.` or `[]`), else never. */
type ChildName<P extends string, K> = K extends `${P}.${infer R}` ? (R extends `${string}.${string}` | `${string}[${string}` ? never : R) : never;

type ScalarKey<P extends string> = {
  [K in SettingKey]: [ChildName<P, K>] extends [never] ? never : [ValueOf<Settings[K]>] extends [never] ? never : K;
}[SettingKey];

/** Present whatever the file says: it has a default, or it is required (a missing one is a problem). */
type AlwaysSet<S> = S extends { readonly default: unknown } | { readonly required: true } ? true : false;

/**
 * The scalar settings directly under `P` with their types from the table: one with a default (or
 * required) is always there, one without is optional (absent when the file leaves it out).
 */
export type Scalars<P extends string> = {
  -readonly [K in ScalarKey<P> as AlwaysSet<Settings[K]> extends true ? ChildName<P, K> : never]: ValueOf<Settings[K]>;
} & {
  -readonly [K in ScalarKey<P> as AlwaysSet<Settings[K]> extends true ? never : ChildName<P, K>]?: ValueOf<Settings[K]>;
};

export interface ReadScalarsOptions<E extends string> {
  /** The prefix as written in the file, when it differs from the table's (`upstreams.api`, `routes[2]`). */
  as?: string;
  /** Resolves a `path` setting against the configuration file's folder. */
  at?: (path: string) => string;
  /** Children the caller reads by hand (a default that depends on another setting, an extra check). */
  except?: readonly E[];
}

/** The scalar children of `prefix` in table order, with what reading each needs. */
const scalarChildren = new Map<string, Array<[name: string, key: SettingKey, setting: Setting]>>();

function childrenWithEntries(prefix: string): Array<[string, SettingKey, Setting]> {
  let children = scalarChildren.get(prefix);
  if (children) return children;
  children = [];
  for (const [key, s] of Object.entries(SETTINGS) as Array<[SettingKey, Setting]>) {
    if (!key.startsWith(`${prefix}.`)) continue;
    const name = key.slice(prefix.length + 1);
    if (/[.[]/.test(name) || !isScalar(s)) continue;
    children.push([name, key, s]);
  }
  scalarChildren.set(prefix, children);
  return children;
}

/** The runtime side of ValueOf: the entries readScalars reads. */
function isScalar(s: Setting): boolean {
  return s.values !== undefined || s.type === 'integer' || s.type === 'boolean' || STRING_KINDS.has(s.type);
}
const STRING_KINDS = new Set(['string', 'path', 'secret', 'header name']);

/**
 * Reads every scalar setting directly under `prefix` from `raw` by its table entry, in table order
 * (so problems come in the order of the reference): default, bounds, allowed values, required.
 */
export function readScalars<P extends string, E extends keyof Scalars<P> & string = never>(
  c: Checker,
  prefix: P,
  raw: Record<string, unknown>,
  options: ReadScalarsOptions<E> = {},
): Omit<Scalars<P>, E> {
  const out: Record<string, unknown> = {};
  const written = options.as ?? prefix;
  for (const [name, , s] of childrenWithEntries(prefix)) {
    if ((options.except as readonly string[] | undefined)?.includes(name)) continue;
    const value = readOne(c, `${written}.${name}`, raw[name], s, options.at);
    if (value !== undefined) out[name] = value;
  }
  return out as Omit<Scalars<P>, E>;
}

function readOne(c: Checker, key: string, value: unknown, s: Setting, at: ((path: string) => string) | undefined): unknown {
  const absent = value === undefined || value === null || value === '';
  if (absent && s.default === undefined) {
    if (s.required) c.problem(key, 'is required');
    return s.required && STRING_KINDS.has(s.type) ? '' : undefined;
  }
  if (s.values !== undefined) return c.oneOf(key, value, s.values, s.default as string);
  if (s.type === 'integer') return c.int(key, value, (s.default as number | undefined) ?? 0, s.min ?? 1, s.max ?? Number.MAX_SAFE_INTEGER);
  if (s.type === 'boolean') return c.bool(key, value, (s.default as boolean | undefined) ?? false);
  const text = c.str(key, value, s.default as string | undefined);
  return s.type === 'path' && text && at ? at(text) : text;
}
