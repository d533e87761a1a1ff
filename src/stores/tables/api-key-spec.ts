import { METHODS } from 'node:http';
import type { NewApiKey } from './api-keys.js';

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };
const METHOD = /^[A-Z]+$/;
const PATH = /^\/(?:[A-Za-z0-9._~-]+\/)*[A-Za-z0-9._~-]+$/;
// eslint-disable-next-line no-control-regex
const NAME = /^[^\s:,\u0000-\u001f\u007f]{1,128}$/;

/** `90d`, `24h`, `30m`, `45s`, `2w` (or plain seconds) as seconds; undefined when it is none of them. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d{1,9})([smhdw]?)$/.exec(text.trim());
  if (!m) return undefined;
  const seconds = Number(m[1]) * UNITS[m[2] || 's']!;
  return seconds > 0 ? seconds : undefined;
}

/** `100/60s`, `10/1m`, `5/s` as requests per window; undefined when it is not that. */
export function parseRate(text: string): { requests: number; windowSeconds: number } | undefined {
  const m = /^(\d{1,9})\/(\d{0,9}[smhdw]?)$/.exec(text.trim());
  if (!m || Number(m[1]) < 1) return undefined;
  const window = parseDuration(/^\d/.test(m[2]!) ? m[2]! : `1${m[2] || 's'}`);
  return window === undefined ? undefined : { requests: Number(m[1]), windowSeconds: window };
}

/** A comma-separated list (or a list already), trimmed, without empty entries. */
export function listOf(value: string | readonly string[] | undefined): string[] {
  if (value === undefined) return [];
  const items = typeof value === 'string' ? value.split(',') : value;
  return items.map((s) => String(s).trim()).filter((s) => s !== '');
}

/** What `keys create` and the admin API take, as text; read into a NewApiKey or the problems with it. */
export interface KeySpecInput {
  name?: unknown;
  user?: unknown;
  groups?: unknown;
  routes?: unknown;
  methods?: unknown;
  expiresIn?: unknown;
  rate?: unknown;
}

export function readKeySpec(input: KeySpecInput): { spec: NewApiKey; problems: string[] } {
  const problems: string[] = [];
  const text = (field: string, v: unknown): string | undefined => {
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string') return v;
    if (typeof v === 'number') return String(v);
    problems.push(`${field} must be text`);
    return undefined;
  };
  const list = (field: string, v: unknown): string[] => {
    if (v === undefined || v === null) return [];
    if (typeof v === 'string') return listOf(v);
    if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return listOf(v as string[]);
    problems.push(`${field} must be a comma-separated text or a list of texts`);
    return [];
  };
  const name = text('name', input.name);
  if (name === undefined || !NAME.test(name)) problems.push('name is required: 1 to 128 characters, without spaces, commas or colons');
  const user = text('user', input.user);
  if (user !== undefined && !NAME.test(user)) problems.push('user must be 1 to 128 characters, without spaces, commas or colons');
  const groups = list('groups', input.groups);
  for (const g of groups) if (!NAME.test(g)) problems.push(`groups: "${g}" is not a group name`);
  const routes = list('routes', input.routes);
  for (const r of routes) {
    if (!PATH.test(r)) problems.push(`routes: "${r}" must be an absolute path of plain segments, e.g. /v1/reports`);
    else if (hasDotSegment(r)) problems.push(`routes: "${r}" has a dot segment (. or ..); request paths are resolved before they are compared, so it would never match: write the path it means`);
  }
  const methods = list('methods', input.methods).map((m) => m.toUpperCase());
  for (const m of methods) {
    if (!METHOD.test(m)) problems.push(`methods: "${m}" is not a method`);
    else if (!METHODS.includes(m)) problems.push(`methods: "${m}" is not an HTTP method the gateway can receive, so it would never match`);
  }
  const spec: NewApiKey = { name: name ?? '', groups, routes, methods };
  if (user !== undefined) spec.user = user;
  const expiresIn = text('expiresIn', input.expiresIn);
  if (expiresIn !== undefined) {
    spec.expiresInSeconds = parseDuration(expiresIn);
    if (spec.expiresInSeconds === undefined) problems.push(`expires-in "${expiresIn}" must be a duration such as 90d, 24h, 30m or 3600s`);
  }
  const rate = text('rate', input.rate);
  if (rate !== undefined) {
    spec.rate = parseRate(rate);
    if (spec.rate === undefined) problems.push(`rate "${rate}" must be requests per window such as 100/60s or 10/1m`);
  }
  return { spec, problems };
}

/** A `.` or `..` segment: normalized request paths have none, so a key's route with one matches nothing. */
function hasDotSegment(path: string): boolean {
  return path.split('/').some((segment) => segment === '.' || segment === '..');
}
