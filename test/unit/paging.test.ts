import { describe, expect, it } from 'vitest';
import type { PagingRules } from '../../src/config/types.js';
import { HttpProblem } from '../../src/http/problem.js';
import { refusalOf } from '../support/refusal.js';
import { canonicalQuery, normalizePaging, refusePagingVariants } from '../../src/paging/normalize.js';

/** The conversations list of the spec: sizes of section 4/8, sortable by campaignId (and createdAt). */
const RULES: PagingRules = { sizes: [10, 20, 50, 100, 200], defaultSize: 20, sortable: ['campaignId', 'createdAt'] };
/** A paged list that cannot be sorted. */
const UNSORTABLE: PagingRules = { sizes: [10, 20, 50, 100, 200], defaultSize: 20, sortable: [] };
/** Custom sizes and default. */
const CUSTOM: PagingRules = { sizes: [5, 25], defaultSize: 5, sortable: ['name'] };

type ErrorCode = 'invalid_page_size' | 'invalid_page' | 'invalid_sort';
const ERROR_CODES: readonly string[] = ['invalid_page_size', 'invalid_page', 'invalid_sort'];
/** The parameter each code is about; the detail must name it as a word. */
const PARAMETER: Record<ErrorCode, RegExp> = { invalid_page_size: /\bsize\b/, invalid_page: /\bpage\b/, invalid_sort: /\bsort\b/ };

/** [description, query sent, canonical query expected | error code]. Expected queries are compared as parsed entries. */
type Case = [string, string, string | ErrorCode];

const cases: Case[] = [
  // defaults
  ['no parameters: default size 20 and page 0 are added', '', 'size=20&page=0'],
  ['page only: default size added', 'page=3', 'size=20&page=3'],
  ['size only: page 0 added', 'size=50', 'size=50&page=0'],
  ['page=0 kept', 'page=0', 'size=20&page=0'],
  ['largest accepted page 999999999', 'page=999999999', 'size=20&page=999999999'],
  ['size and page in the other order come out canonical', 'page=2&size=100', 'size=100&page=2'],
  // each allowed size
  ['size 10 allowed', 'size=10&page=1', 'size=10&page=1'],
  ['size 20 allowed', 'size=20&page=1', 'size=20&page=1'],
  ['size 50 allowed', 'size=50&page=1', 'size=50&page=1'],
  ['size 100 allowed', 'size=100&page=1', 'size=100&page=1'],
  ['size 200 allowed', 'size=200&page=1', 'size=200&page=1'],
  // disallowed sizes
  ['size 0', 'size=0', 'invalid_page_size'],
  ['size 15 (not in the list)', 'size=15', 'invalid_page_size'],
  ['size 201 (above the largest)', 'size=201', 'invalid_page_size'],
  ['size -10', 'size=-10', 'invalid_page_size'],
  ['size 1e2 (exponent spelling of 100)', 'size=1e2', 'invalid_page_size'],
  ['size 20.0 (decimal spelling of 20)', 'size=20.0', 'invalid_page_size'],
  ['size " 20" (leading space)', 'size=%2020', 'invalid_page_size'],
  ['size "+20" (plus decodes to a space)', 'size=+20', 'invalid_page_size'],
  ['size "20 " (trailing space)', 'size=20%20', 'invalid_page_size'],
  ['size 020 (leading zero)', 'size=020', 'invalid_page_size'],
  ['size 0x14 (hex spelling of 20)', 'size=0x14', 'invalid_page_size'],
  ['size empty', 'size=', 'invalid_page_size'],
  ['size without "="', 'size', 'invalid_page_size'],
  ['size abc', 'size=abc', 'invalid_page_size'],
  ['size repeated with the same value', 'size=10&size=10', 'invalid_page_size'],
  ['size repeated with different values', 'size=10&size=20', 'invalid_page_size'],
  // page
  ['page repeated', 'page=1&page=1', 'invalid_page'],
  ['page repeated with different values', 'page=1&page=2', 'invalid_page'],
  ['page -1', 'page=-1', 'invalid_page'],
  ['page 1.5', 'page=1.5', 'invalid_page'],
  ['page 1.0', 'page=1.0', 'invalid_page'],
  ['page 1e3', 'page=1e3', 'invalid_page'],
  ['page abc', 'page=abc', 'invalid_page'],
  ['page empty', 'page=', 'invalid_page'],
  ['page " 1"', 'page=%201', 'invalid_page'],
  ['page 1000000000 (too large)', 'page=1000000000', 'invalid_page'],
  ['page 99999999999999999999 (beyond a safe integer)', 'page=99999999999999999999', 'invalid_page'],
  // sort
  ['sort by property only: direction asc', 'sort=campaignId', 'size=20&page=0&sort=campaignId,asc'],
  ['sort prop,asc', 'sort=campaignId,asc', 'size=20&page=0&sort=campaignId,asc'],
  ['sort prop,DESC → lower case', 'sort=campaignId,DESC', 'size=20&page=0&sort=campaignId,desc'],
  ['sort prop,Desc → lower case', 'sort=campaignId,Desc', 'size=20&page=0&sort=campaignId,desc'],
  ['sort prop,ASC → lower case', 'sort=createdAt,ASC', 'size=20&page=0&sort=createdAt,asc'],
  ['sort with the comma percent-encoded', 'sort=campaignId%2CDESC', 'size=20&page=0&sort=campaignId,desc'],
  ['several sorts keep their order (a, b)', 'sort=campaignId,desc&sort=createdAt', 'size=20&page=0&sort=campaignId,desc&sort=createdAt,asc'],
  ['several sorts keep their order (b, a)', 'sort=createdAt&sort=campaignId,desc', 'size=20&page=0&sort=createdAt,asc&sort=campaignId,desc'],
  ['sort by an unknown property', 'sort=name', 'invalid_sort'],
  ['sort property is case-sensitive', 'sort=campaignid', 'invalid_sort'],
  ['sort with a bad direction', 'sort=campaignId,up', 'invalid_sort'],
  ['sort with a direction prefix', 'sort=campaignId,descending', 'invalid_sort'],
  ['sort "prop," (empty direction)', 'sort=campaignId,', 'invalid_sort'],
  ['sort ",asc" (empty property)', 'sort=,asc', 'invalid_sort'],
  ['sort "prop,asc,desc" (three parts)', 'sort=campaignId,asc,desc', 'invalid_sort'],
  ['sort with a space before the direction', 'sort=campaignId,%20desc', 'invalid_sort'],
  ['sort empty', 'sort=', 'invalid_sort'],
  ['sort naming the same property twice', 'sort=campaignId&sort=campaignId,desc', 'invalid_sort'],
  ['sort naming the same property twice, same direction', 'sort=createdAt,asc&sort=createdAt', 'invalid_sort'],
  ['one bad sort among good ones', 'sort=campaignId&sort=bogus,asc', 'invalid_sort'],
  // other parameters
  ['other parameters pass through in order, paging after them', 'q=x&size=10&status=open&page=2&q=y', 'q=x&status=open&q=y&size=10&page=2'],
  ['other parameters keep their decoded values', 'filter=a%2Cb&name=J%C3%BCrgen&empty=', 'filter=a,b&name=Jürgen&empty=&size=20&page=0'],
  ['names that only start like a paging name pass', 'sizes=3&pages=2&sorted=1&page_size=9', 'sizes=3&pages=2&sorted=1&page_size=9&size=20&page=0'],
  ['a nested name under another parameter passes', 'a.size=3&filter[size]=4', 'a.size=3&filter[size]=4&size=20&page=0'],
  // Another spelling of a paging name, which Express (qs) or ASP.NET reads next to the canonical one: refused.
  ['Size (another case) is refused', 'Size=15', 'invalid_page_size'],
  ['SIZE next to size', 'size=10&SIZE=100000', 'invalid_page_size'],
  ['size[] next to size (qs reads 100000)', 'size=10&size[]=100000', 'invalid_page_size'],
  ['size[0]', 'size[0]=100000', 'invalid_page_size'],
  ['size[] encoded', 'size%5B%5D=100000', 'invalid_page_size'],
  ['[size] (qs reads size)', '[size]=100000', 'invalid_page_size'],
  ['size.x (qs with allowDots)', 'size.x=1', 'invalid_page_size'],
  ['size%2ex (an encoded dot)', 'size%2ex=1', 'invalid_page_size'],
  ['.size', '.size=1', 'invalid_page_size'],
  ['size[', 'size[=1', 'invalid_page_size'],
  ['PAGE', 'PAGE=3', 'invalid_page'],
  ['page[]', 'page[]=3', 'invalid_page'],
  ['Sort', 'Sort=name', 'invalid_sort'],
  ['sort[0]', 'sort[0]=name', 'invalid_sort'],
  ['paging and sort among other parameters', 'a=1&sort=createdAt,desc&b=2&size=200', 'a=1&b=2&size=200&page=0&sort=createdAt,desc'],
];

function expectProblem(fn: () => unknown, code: ErrorCode): HttpProblem {
  const thrown = refusalOf(fn);
  expect(thrown, 'expected a 400 problem').toBeInstanceOf(HttpProblem);
  const problem = thrown!;
  expect(problem.status).toBe(400);
  expect(problem.code).toBe(code);
  expect(problem.message, `detail "${problem.message}" should name the parameter`).toMatch(PARAMETER[code]);
  return problem;
}

function entries(query: string): [string, string][] {
  return [...new URLSearchParams(query)];
}

describe('normalizePaging (spec section 4, DESIGN "Paging")', () => {
  it.each(cases)('%s: %j → %j', (_description, input, expected) => {
    const query = new URLSearchParams(input);
    const before = query.toString();
    if (ERROR_CODES.includes(expected)) {
      expectProblem(() => normalizePaging(query, RULES), expected as ErrorCode);
    } else {
      expect([...normalizePaging(query, RULES)]).toEqual(entries(expected));
    }
    // Pure: the input is never changed.
    expect(query.toString()).toBe(before);
  });

  it('serializes the canonical query with URLSearchParams (comma encoded)', () => {
    expect(normalizePaging(new URLSearchParams('sort=campaignId,DESC&size=50&page=3'), RULES).toString())
      .toBe('size=50&page=3&sort=campaignId%2Cdesc');
  });

  it('an invalid size names the allowed values in the detail and in the body', () => {
    const problem = expectProblem(() => normalizePaging(new URLSearchParams('size=15'), RULES), 'invalid_page_size');
    for (const size of RULES.sizes) expect(problem.message).toContain(String(size));
    expect(problem.toBody()).toMatchObject({ status: 400, code: 'invalid_page_size', allowed: RULES.sizes });
  });

  it('an unknown sort property names the sortable properties', () => {
    const problem = expectProblem(() => normalizePaging(new URLSearchParams('sort=name'), RULES), 'invalid_sort');
    expect(problem.message).toContain('campaignId');
    expect(problem.message).toContain('createdAt');
  });

  describe('a route with no sortable property', () => {
    it.each<Case>([
      ['no sort: defaults only', '', 'size=20&page=0'],
      ['paging still applies', 'size=100&page=4', 'size=100&page=4'],
      ['any sort is refused', 'sort=campaignId', 'invalid_sort'],
      ['a sort with direction is refused', 'sort=createdAt,desc', 'invalid_sort'],
      ['an empty sort is refused', 'sort=', 'invalid_sort'],
    ])('%s: %j → %j', (_description, input, expected) => {
      if (ERROR_CODES.includes(expected)) expectProblem(() => normalizePaging(new URLSearchParams(input), UNSORTABLE), expected as ErrorCode);
      else expect([...normalizePaging(new URLSearchParams(input), UNSORTABLE)]).toEqual(entries(expected));
    });
  });

  describe('custom rules (sizes [5, 25], defaultSize 5)', () => {
    it.each<Case>([
      ['default size is 5', '', 'size=5&page=0'],
      ['size 5 allowed', 'size=5&page=1', 'size=5&page=1'],
      ['size 25 allowed', 'size=25', 'size=25&page=0'],
      ['size 20 (a spec default, not in these rules)', 'size=20', 'invalid_page_size'],
      ['size 10 (not in these rules)', 'size=10', 'invalid_page_size'],
      ['sort by its own property', 'sort=name,DESC', 'size=5&page=0&sort=name,desc'],
      ['sort by a property of another route', 'sort=campaignId', 'invalid_sort'],
    ])('%s: %j → %j', (_description, input, expected) => {
      if (ERROR_CODES.includes(expected)) expectProblem(() => normalizePaging(new URLSearchParams(input), CUSTOM), expected as ErrorCode);
      else expect([...normalizePaging(new URLSearchParams(input), CUSTOM)]).toEqual(entries(expected));
    });

    it('the detail names the custom allowed sizes, not the defaults', () => {
      const problem = expectProblem(() => normalizePaging(new URLSearchParams('size=20'), CUSTOM), 'invalid_page_size');
      expect(problem.message).toContain('5');
      expect(problem.message).toContain('25');
      expect(problem.message).not.toContain('200');
    });
  });
});

describe('canonicalQuery: other spellings of the paging names, on the raw query', () => {
  it.each([
    ['size=10&size[]=100000', 'invalid_page_size'],
    ['size=10&size%5B%5D=100000', 'invalid_page_size'],
    ['size=10&size%5b0%5d=100000', 'invalid_page_size'],
    ['size=10&SIZE=100000', 'invalid_page_size'],
    ['size=10&%53IZE=100000', 'invalid_page_size'],
    ['size=10&size.x=100000', 'invalid_page_size'],
    ['size=10&size%5B%5D%ZZ=1', 'invalid_page_size'],
    ['size=10&%5Bsize%5D=100000', 'invalid_page_size'],
    ['page[]=1', 'invalid_page'],
    ['SORT=campaignId', 'invalid_sort'],
    // Names a parser reads as a paging name once it stops at a NUL or trims spaces and invisible characters.
    ['size%00=1', 'invalid_page_size'],
    ['size=10&size%00=100000', 'invalid_page_size'],
    ['size%00x=1', 'invalid_page_size'],
    ['%00size=1', 'invalid_page_size'],
    ['size%0A=1', 'invalid_page_size'],
    ['size%7F=1', 'invalid_page_size'],
    ['size%C2%85=1', 'invalid_page_size'],
    ['size%20=1', 'invalid_page_size'],
    ['size+=1', 'invalid_page_size'],
    ['%20size=1', 'invalid_page_size'],
    ['size%C2%A0=1', 'invalid_page_size'],
    ['size%E2%80%8B=1', 'invalid_page_size'],
    ['%EF%BB%BFsize=1', 'invalid_page_size'],
    ['size%FF=1', 'invalid_page_size'],
    ['page%09=2', 'invalid_page'],
    ['sort%00=x', 'invalid_sort'],
  ])('refuses %j with %s', (search, code) => {
    expect(refusalOf(() => canonicalQuery(search, RULES))).toMatchObject({ status: 400, code });
  });

  it('other parameters are left as written', () => {
    expect(canonicalQuery('sizes=1&a.size=2&size=10', RULES)).toBe('sizes=1&a.size=2&size=10&page=0');
    expect(canonicalQuery('x%00size=1&sizes%00=2&my%20size=3&size=10', RULES)).toBe('x%00size=1&sizes%00=2&my%20size=3&size=10&page=0');
  });
});

describe('refusePagingVariants (a forward-auth answer: values unchecked, other spellings refused)', () => {
  it.each(['', 'size=100000&page=9&sort=x', 'q=1&sizes=2', 'si%zze=1'])('passes %j', (search) => {
    expect(() => refusePagingVariants(search)).not.toThrow();
  });
  it.each([['size[]=100000', 'invalid_page_size'], ['SIZE=1', 'invalid_page_size'], ['size%5B%5D=1', 'invalid_page_size'], ['Page=1', 'invalid_page'], ['sort.x=1', 'invalid_sort']])(
    'refuses %j with %s', (search, code) => {
      expect(refusalOf(() => refusePagingVariants(search))).toMatchObject({ status: 400, code });
    });
});
