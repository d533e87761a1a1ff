import type { PagingRules } from '../config/types.js';
import { DomainError } from '../core/domain-error.js';

const NON_NEGATIVE = /^(?:0|[1-9]\d{0,8})$/;
const SORT = /^([A-Za-z_][A-Za-z0-9_.]*)(?:,([A-Za-z]+))?$/;

/**
 * The paging rules of spec section 4 as a pure function: `size` from the allowed sizes (default when
 * absent), `page` a 0-based non-negative integer (0 when absent), each `sort` as `prop,asc|desc` with
 * a known property. Other parameters keep their order; the paging ones follow them in one canonical
 * order. Refuses (a DomainError: invalid_page_size, invalid_page, invalid_sort) naming the parameter and
 * what is allowed.
 */
export function normalizePaging(query: URLSearchParams, rules: PagingRules): URLSearchParams {
  const out = new URLSearchParams();
  const given: Given = { sizes: [], pages: [], sorts: [] };
  for (const [name, value] of query) {
    if (!take(given, pagingName(name), value)) out.append(name, value);
  }
  const paging = pagingOf(given, rules);
  out.append('size', String(paging.size));
  out.append('page', String(paging.page));
  for (const sort of paging.sorts) out.append('sort', sort);
  return out;
}

/** The paging parameters as the client gave them (decoded), in order. */
interface Given {
  sizes: string[];
  pages: string[];
  sorts: string[];
}

function take(given: Given, name: PagingName | undefined, value: string): boolean {
  if (name === 'size') given.sizes.push(value);
  else if (name === 'page') given.pages.push(value);
  else if (name === 'sort') given.sorts.push(value);
  else return false;
  return true;
}

/** The rules applied: the size, the page, each sort as `prop,asc|desc`; refuses naming what is allowed. */
function pagingOf(given: Given, rules: PagingRules): { size: number; page: number; sorts: string[] } {
  const seen = new Set<string>();
  return {
    size: pageSize(given.sizes, rules),
    page: pageNumber(given.pages),
    sorts: given.sorts.map((value) => sortOrder(value, rules, seen)),
  };
}

type PagingName = 'size' | 'page' | 'sort';
const PAGING_PARAMS: ReadonlySet<string> = new Set<PagingName>(['size', 'page', 'sort']);
const CODES: Record<PagingName, 'invalid_page_size' | 'invalid_page' | 'invalid_sort'> = { size: 'invalid_page_size', page: 'invalid_page', sort: 'invalid_sort' };
/**
 * A name some upstream reads as a paging parameter: any case, and with what query parsers take as
 * nesting around it: `size[]`, `size[0]`, `[size]` (qs, Express), `size.x`, `.size` (qs allowDots); and
 * with what parsers drop or stop at around it: control characters (a C parser ends the name at `size\0`),
 * whitespace (`size ` trimmed), invisible format characters (`size\u200B`) and the replacement character
 * a malformed escape decodes to.
 */
const VARIANT = /^[[\].\p{Cc}\p{Cf}\s\uFFFD]*(size|page|sort)(?:[[\].\p{Cc}\p{Cf}\s\uFFFD]|$)/iu;

/**
 * A decoded parameter name: `size`, `page` or `sort` when it is exactly one of them; undefined for any
 * other parameter; refused for another spelling of a paging name (`SIZE`, `size[]`, `size%5B%5D`, `Page.x`, `size%00`),
 * which Express (qs) or ASP.NET would read as the paging parameter next to the canonical one the
 * gateway writes.
 */
function pagingName(name: string): PagingName | undefined {
  if (PAGING_PARAMS.has(name)) return name as PagingName;
  const m = VARIANT.exec(name);
  if (!m) return undefined;
  const canonical = m[1]!.toLowerCase() as PagingName;
  throw new DomainError(CODES[canonical], `the paging parameter is spelt ${canonical} exactly (lower case, no brackets, dots, spaces or control characters); ${JSON.stringify(name.slice(0, 64))} is refused on this paged list`);
}

/**
 * The name of a raw `name=value` part as a paging name (see pagingName), decoded as qs decodes it
 * (the whole name, left as written when malformed) and as URLSearchParams does (each valid escape):
 * a variant under either reading is refused.
 */
function rawPagingName(rawName: string): PagingName | undefined {
  const strict = decodeComponent(rawName);
  if (strict !== undefined) return pagingName(strict);
  pagingName(rawName.replace(/\+/g, ' '));
  pagingName(lenientDecode(rawName));
  return undefined;
}

/** WHATWG (URLSearchParams) decoding: `+` is a space, valid escapes decoded, others left as written. */
function lenientDecode(raw: string): string {
  return raw.replace(/\+/g, ' ').replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'));
}

/**
 * On a paged list that another proxy forwards (a forward-auth answer): the values are not checked, but
 * another spelling of a paging name is refused as it is on a forwarded request.
 */
export function refusePagingVariants(search: string): void {
  for (const part of search === '' ? [] : search.split('&')) {
    const eq = part.indexOf('=');
    rawPagingName(eq < 0 ? part : part.slice(0, eq));
  }
}

/**
 * The query the upstream receives: every other parameter exactly as the client spelled it (bytes
 * untouched, even values that are not UTF-8), in order, then the paging parameters as
 * normalizePaging makes them.
 */
export function canonicalQuery(search: string, rules: PagingRules): string {
  const kept: string[] = [];
  const given: Given = { sizes: [], pages: [], sorts: [] };
  for (const part of search === '' ? [] : search.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const name = rawPagingName(eq < 0 ? part : part.slice(0, eq));
    if (name === undefined) kept.push(part);
    else take(given, name, decodeComponent(eq < 0 ? '' : part.slice(eq + 1)) ?? '\uFFFD');
  }
  const paging = pagingOf(given, rules);
  // Written out directly: sizes and pages are digits, properties are [A-Za-z0-9_.] (see SORT), so
  // only the comma needs encoding, as URLSearchParams would write it.
  let canonical = `size=${paging.size}&page=${paging.page}`;
  for (const sort of paging.sorts) canonical += `&sort=${sort.replace(',', '%2C')}`;
  return kept.length === 0 ? canonical : `${kept.join('&')}&${canonical}`;
}

/** application/x-www-form-urlencoded decoding of one name or value; undefined when malformed. */
function decodeComponent(raw: string): string | undefined {
  if (!raw.includes('%') && !raw.includes('+')) return raw;
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

function pageSize(values: string[], rules: PagingRules): number {
  // The refusals' wording is made only when one is thrown.
  const allowed = () => `size must be one of ${rules.sizes.join(', ')}`;
  if (values.length === 0) return rules.defaultSize;
  if (values.length > 1) throw new DomainError('invalid_page_size', `size may be given only once; ${allowed()}`);
  const size = NON_NEGATIVE.test(values[0]!) ? Number(values[0]) : NaN;
  if (!rules.sizes.includes(size)) throw new DomainError('invalid_page_size', allowed(), { details: { allowed: rules.sizes } });
  return size;
}

function pageNumber(values: string[]): number {
  const rule = 'page must be a non-negative integer below 1000000000 (0 is the first page)';
  if (values.length === 0) return 0;
  if (values.length > 1) throw new DomainError('invalid_page', `page may be given only once; ${rule}`);
  if (!NON_NEGATIVE.test(values[0]!)) throw new DomainError('invalid_page', rule);
  return Number(values[0]);
}

function sortOrder(value: string, rules: PagingRules, seen: Set<string>): string {
  if (rules.sortable.length === 0) throw new DomainError('invalid_sort', 'sort is not allowed: this list cannot be sorted');
  const allowed = () => `sort must be <property>[,asc|desc] with a property among ${rules.sortable.join(', ')}`;
  const m = SORT.exec(value);
  if (!m) throw new DomainError('invalid_sort', allowed(), { details: { allowed: rules.sortable } });
  const [, property, direction = 'asc'] = m as unknown as [string, string, string | undefined];
  if (!rules.sortable.includes(property)) {
    throw new DomainError('invalid_sort', `cannot sort by ${property}; ${allowed()}`, { details: { allowed: rules.sortable } });
  }
  const dir = direction.toLowerCase();
  if (dir !== 'asc' && dir !== 'desc') throw new DomainError('invalid_sort', `sort direction must be asc or desc, not ${direction}`);
  if (seen.has(property)) throw new DomainError('invalid_sort', `sort names ${property} more than once`);
  seen.add(property);
  return `${property},${dir}`;
}
