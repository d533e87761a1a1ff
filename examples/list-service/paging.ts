// Paging for the list service: parsing `page`, `size` and `sort` from a
// query string, sorting records and building the page envelope.

type SortDirection = 'asc' | 'desc';

export interface SortOrder<K extends string> {
  property: K;
  direction: SortDirection;
}

export interface PageRequest<K extends string> {
  /** 0-based page number. */
  page: number;
  /** Page size, 1..MAX_PAGE_SIZE. */
  size: number;
  /** Applied in order; later entries break ties of earlier ones. */
  sort: SortOrder<K>[];
}

interface Pageable {
  pageNumber: number;
  pageSize: number;
  offset: number;
}

/** The page envelope: the spec of the API. */
export interface Page<T> {
  content: T[];
  pageable: Pageable;
  totalPages: number;
  totalElements: number;
  numberOfElements: number;
  last: boolean;
  first: boolean;
}

interface ParseError {
  ok: false;
  code: string;
  detail: string;
}

export type ParseResult<T> = { ok: true; value: T } | ParseError;

const DEFAULT_PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 200;
const DEFAULT_PAGE = 0;
const INVALID_PAGING = 'invalid_paging';

const DIGITS = /^[0-9]+$/;

function invalid(detail: string): ParseError {
  return { ok: false, code: INVALID_PAGING, detail };
}

/** Parses an optional, single-valued integer parameter within [min, max]. */
function parseIntegerParam(
  params: URLSearchParams,
  name: string,
  fallback: number,
  min: number,
  max: number,
): ParseResult<number> {
  const values = params.getAll(name);
  if (values.length === 0) return { ok: true, value: fallback };
  if (values.length > 1) return invalid(`'${name}' must be given at most once`);
  const raw = values[0] ?? '';
  const value = DIGITS.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    return invalid(`'${name}' must be an integer from ${min} to ${max}, got '${raw}'`);
  }
  return { ok: true, value };
}

function parseDirection(raw: string | undefined): SortDirection | undefined {
  if (raw === undefined) return 'asc';
  const lower = raw.toLowerCase();
  return lower === 'asc' || lower === 'desc' ? lower : undefined;
}

/** Parses one `sort` value: `prop`, `prop,asc` or `prop,desc`. */
function parseSortOrder<K extends string>(
  raw: string,
  sortable: readonly K[],
): ParseResult<SortOrder<K>> {
  const parts = raw.split(',');
  if (parts.length > 2) return invalid(`'sort' must be 'property' or 'property,asc|desc', got '${raw}'`);
  const [name = '', directionText] = parts;
  const property = sortable.find((candidate) => candidate === name);
  if (property === undefined) {
    return invalid(`cannot sort by '${name}'; sortable properties: ${sortable.join(', ')}`);
  }
  const direction = parseDirection(directionText);
  if (direction === undefined) {
    return invalid(`unknown sort direction '${directionText ?? ''}'; use 'asc' or 'desc'`);
  }
  return { ok: true, value: { property, direction } };
}

function parseSort<K extends string>(
  params: URLSearchParams,
  sortable: readonly K[],
): ParseResult<SortOrder<K>[]> {
  const orders: SortOrder<K>[] = [];
  for (const raw of params.getAll('sort')) {
    const parsed = parseSortOrder(raw, sortable);
    if (!parsed.ok) return parsed;
    orders.push(parsed.value);
  }
  return { ok: true, value: orders };
}

/** Reads `page`, `size` and `sort` (repeatable) from the query. */
export function parsePageRequest<K extends string>(
  params: URLSearchParams,
  sortable: readonly K[],
): ParseResult<PageRequest<K>> {
  const size = parseIntegerParam(params, 'size', DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE);
  if (!size.ok) return size;
  const page = parseIntegerParam(params, 'page', DEFAULT_PAGE, 0, Number.MAX_SAFE_INTEGER);
  if (!page.ok) return page;
  if (page.value * size.value > Number.MAX_SAFE_INTEGER) {
    return invalid(`'page' ${page.value} is out of range for size ${size.value}`);
  }
  const sort = parseSort(params, sortable);
  if (!sort.ok) return sort;
  return { ok: true, value: { page: page.value, size: size.value, sort: sort.value } };
}

function compareStrings(a: string, b: string): number {
  if (a < b) return -1;
  return a > b ? 1 : 0;
}

function comparatorFor<K extends string, T extends Record<K, string>>(
  orders: readonly SortOrder<K>[],
): (a: T, b: T) => number {
  return (a, b) => {
    for (const { property, direction } of orders) {
      const result = compareStrings(a[property], b[property]);
      if (result !== 0) return direction === 'asc' ? result : -result;
    }
    return 0;
  };
}

/** Returns a sorted copy (stable; records with equal keys keep their order). */
export function sortRecords<K extends string, T extends Record<K, string>>(
  records: readonly T[],
  orders: readonly SortOrder<K>[],
): readonly T[] {
  if (orders.length === 0) return records;
  return [...records].sort(comparatorFor<K, T>(orders));
}

/** Cuts one page out of already sorted records and wraps it in the envelope. */
function toPage<T>(records: readonly T[], page: number, size: number): Page<T> {
  const offset = page * size;
  const content = records.slice(offset, offset + size);
  const totalElements = records.length;
  const totalPages = Math.ceil(totalElements / size);
  return {
    content,
    pageable: { pageNumber: page, pageSize: size, offset },
    totalPages,
    totalElements,
    numberOfElements: content.length,
    last: page >= totalPages - 1,
    first: page === 0,
  };
}

/** Sorts and pages in one step. */
export function paginate<K extends string, T extends Record<K, string>>(
  records: readonly T[],
  request: PageRequest<K>,
): Page<T> {
  return toPage(sortRecords(records, request.sort), request.page, request.size);
}
