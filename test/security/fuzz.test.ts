import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAuthorization } from '../../src/auth/authorization-header.js';
import { DEFAULT_PAGE_SIZES } from '../../src/config/validate.js';
import { normalizePath } from '../../src/core/path.js';
import { DomainError } from '../../src/core/domain-error.js';
import { toProblem } from '../../src/http/errors.js';
import type { PagingRules } from '../../src/config/types.js';
import { normalizePaging } from '../../src/paging/normalize.js';
import { basic, createTokens, gatewayFixture } from '../support/fixtures.js';
import { exchange, parseAnswer } from '../support/raw-client.js';

// Property-based fuzzing of the three parsers that stand between a client and an upstream, then
// random headers and request targets through the running gateway. numRuns are kept moderate so the
// file runs in a few seconds; a failure prints fast-check's seed and path to replay it.

const PURE_RUNS = 1500;
const GATEWAY_RUNS = 300;

/** Well-formed UTF-16 only: Buffer would turn a lone surrogate into U+FFFD and break round trips. */
const wellFormed = (s: string) => Buffer.from(s, 'utf8').toString('utf8') === s;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

/** Any string: short runs of every code-point class, plus the characters the parsers care about. */
const anyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.string({ unit: fc.constantFrom(' ', '\t', ':', '=', '.', '/', '%', '\\', '\0', 'a', 'Z', '0', '+', '-', '_', '~', 'é'), maxLength: 40 }),
);

// -----------------------------------------------------------------------------------------------
// parseAuthorization: never throws; whatever it accepts is well-formed.
// -----------------------------------------------------------------------------------------------

const schemes = fc.constantFrom('Basic', 'basic', 'BASIC', 'Bearer', 'bearer', 'BeArEr', 'Digest', 'Negotiate', '', 'Basic:', 'Bearer\u0000');
const separators = fc.constantFrom(' ', '', '  ', '\t', ' \t', '\u00a0', ',');
const credentialsPart = fc.oneof(
  fc.uint8Array({ maxLength: 80 }).map((b) => Buffer.from(b).toString('base64')),
  fc.uint8Array({ maxLength: 80 }).map((b) => Buffer.from(b).toString('base64').replace(/=+$/, '')),
  fc.uint8Array({ maxLength: 80 }).map((b) => Buffer.from(b).toString('base64url')),
  fc.tuple(anyString, anyString).map(([u, p]) => Buffer.from(`${u}:${p}`, 'utf8').toString('base64')),
  fc.string({ unit: fc.constantFrom(...'ABCxyz019-._~+/=. "\'\\'.split('')), maxLength: 60 }),
  anyString,
);
const authorizationHeader = fc.oneof(
  anyString,
  fc.tuple(schemes, separators, credentialsPart, fc.constantFrom('', ' ', '=', ' x', '\t')).map((p) => p.join('')),
);

function checkParse(header: string): void {
  const r = parseAuthorization(header);
  if (!r.ok) {
    expect(['basic', 'bearer', 'unknown']).toContain(r.scheme);
    expect(typeof r.reason).toBe('string');
    return;
  }
  if (r.credentials.scheme === 'bearer') {
    expect(r.credentials.token).toMatch(TOKEN68);
    return;
  }
  const { user, password } = r.credentials;
  expect(user).not.toBe('');
  expect(user).not.toContain(':');
  expect(CONTROL.test(user) || CONTROL.test(password)).toBe(false);
}

describe('fuzz: parseAuthorization', () => {
  it('never throws on any string, and what it accepts is well-formed', () => {
    fc.assert(fc.property(authorizationHeader, (header) => {
      expect(() => checkParse(header)).not.toThrow();
      checkParse(header);
    }), { numRuns: PURE_RUNS * 2 });
  });

  it('Basic round trip: any user (no colon, no control) and password (colons allowed) parse back exactly', () => {
    const user = anyString.filter((s) => s !== '' && !s.includes(':') && !CONTROL.test(s) && wellFormed(s));
    const password = anyString.filter((s) => !CONTROL.test(s) && wellFormed(s));
    fc.assert(fc.property(user, password, (u, p) => {
      const r = parseAuthorization(basic(u, p));
      expect(r).toEqual({ ok: true, credentials: { scheme: 'basic', user: u, password: p } });
    }), { numRuns: PURE_RUNS });
  });
});

// -----------------------------------------------------------------------------------------------
// normalizePaging: only a domain refusal answered 400; output canonical and a fixed point.
// -----------------------------------------------------------------------------------------------

const RULES: PagingRules[] = [
  { sizes: DEFAULT_PAGE_SIZES, defaultSize: 20, sortable: ['campaignId', 'createdAt', 'meta.score'] },
  { sizes: [1, 5, 1000], defaultSize: 5, sortable: [] },
];
const PAGING_CODES = ['invalid_page_size', 'invalid_page', 'invalid_sort'];
const SORT_OUT = /^[A-Za-z_][A-Za-z0-9_.]*,(asc|desc)$/;
const PAGE_OUT = /^(0|[1-9]\d*)$/;
const PAGING = new Set(['size', 'page', 'sort']);

const paramName = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('size', 'page', 'sort') },
  { weight: 3, arbitrary: fc.constantFrom('q', 'filter', 'Size', 'size ', 'sort[]', 'page%20', '', '&', '=') },
  { weight: 1, arbitrary: anyString },
);
const paramValue = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('0', '1', '5', '10', '20', '200', '1000', '01', '-1', '+1', '1e3', '1.0', ' 10', '0x10', '999999999', '1000000000', '99999999999999999999', 'NaN', '') },
  { weight: 4, arbitrary: fc.constantFrom('campaignId', 'createdAt,desc', 'createdAt,DESC', 'campaignId,asc', 'campaignId,', ',asc', 'meta.score,Asc', 'createdAt,desc,asc', 'constructor', '__proto__,asc', 'createdAt;desc', 'créé,asc') },
  { weight: 1, arbitrary: fc.nat().map(String) },
  { weight: 2, arbitrary: anyString },
);
const query = fc.array(fc.tuple(paramName, paramValue), { maxLength: 8 }).map((pairs) => {
  const q = new URLSearchParams();
  for (const [n, v] of pairs) q.append(n, v);
  return q;
});

function checkPaging(q: URLSearchParams, rules: PagingRules): void {
  let out: URLSearchParams;
  try {
    out = normalizePaging(q, rules);
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    const problem = toProblem(err);
    expect(problem.status).toBe(400);
    expect(PAGING_CODES).toContain(problem.code);
    return;
  }
  const sizes = out.getAll('size');
  expect(sizes).toHaveLength(1);
  expect(sizes[0]).toMatch(/^[1-9]\d*$/);
  expect(rules.sizes).toContain(Number(sizes[0]));
  const pages = out.getAll('page');
  expect(pages).toHaveLength(1);
  expect(pages[0]).toMatch(PAGE_OUT);
  for (const sort of out.getAll('sort')) {
    expect(sort).toMatch(SORT_OUT);
    expect(rules.sortable).toContain(sort.split(',')[0]);
  }
  // Everything else passes through untouched, in order.
  expect([...out].filter(([n]) => !PAGING.has(n))).toEqual([...q].filter(([n]) => !PAGING.has(n)));
  // Idempotence, through the string form the upstream receives.
  const serialized = out.toString();
  expect(normalizePaging(new URLSearchParams(serialized), rules).toString()).toBe(serialized);
}

describe('fuzz: normalizePaging', () => {
  it('throws nothing but a domain refusal answered 400; output canonical (size allowed, page /^(0|[1-9]\\d*)$/, sort prop,asc|desc) and idempotent', () => {
    fc.assert(fc.property(query, fc.constantFrom(...RULES), (q, rules) => checkPaging(q, rules)), { numRuns: PURE_RUNS * 2 });
  });

  it('the same on raw query strings as URLSearchParams parses them', () => {
    const raw = fc.array(fc.oneof(
      fc.constantFrom('size=10', 'size=20', 'page=0', 'page=3', 'sort=createdAt', 'sort=campaignId,DESC', 'size', 'page=', 'sort=', '&', '=', '%', '%2', '%26', '+', 'size=1%30', 'page=%31', 'sort=created%41t'),
      anyString,
    ), { maxLength: 8 }).map((parts) => parts.join('&'));
    fc.assert(fc.property(raw, fc.constantFrom(...RULES), (s, rules) => checkPaging(new URLSearchParams(s), rules)), { numRuns: PURE_RUNS });
  });
});

// -----------------------------------------------------------------------------------------------
// normalizePath: only a domain refusal answered 400 invalid_path; output canonical and a fixed point.
// -----------------------------------------------------------------------------------------------

const pathPiece = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(
    '/', '/', '//', '.', '..', '...', '%2e', '%2E', '%2e%2e', '.%2e', '%2f', '%2F', '%5c', '%5C', '\\', '%25', '%252e', '%32', '%35',
    '%65', '%45', '%66', '%63', '%00', '%41', '%7e', '%7E', '%', '%z', '%4', 'a', 'v1', 'contacts', ';', ';x=1', '~', '-', '%c3%a4', 'ä',
    '%20', '%3f', '%23', '%2', 'e', 'E', 'f', 'c', '5', '2',
  ) },
  { weight: 1, arbitrary: anyString },
);
/** A percent-escape of an escape (`%25` + two hex digits), each digit itself percent-encoded or not. */
const doubleEscape = fc.tuple(fc.constantFrom('2e', '2E', '2f', '5c', '25', '00', '41', '3b'), fc.boolean(), fc.boolean())
  .map(([hh, e1, e2]) => `%25${e1 ? escapeChar(hh[0]!) : hh[0]}${e2 ? escapeChar(hh[1]!) : hh[1]}`);
const pathPieces = fc.array(fc.oneof({ weight: 6, arbitrary: pathPiece }, { weight: 1, arbitrary: doubleEscape }), { maxLength: 14 });
const rawPath = fc.oneof(
  { weight: 9, arbitrary: pathPieces.map((p) => `/${p.join('')}`) },
  { weight: 1, arbitrary: anyString },
);

function escapeChar(ch: string): string {
  return `%${ch.charCodeAt(0).toString(16).toUpperCase()}`;
}

/** The canonical form, or undefined when refused (after checking the refusal is a 400 invalid_path). */
function normalizedOrRefused(raw: string): string | undefined {
  try {
    return normalizePath(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    const problem = toProblem(err);
    expect(problem.status).toBe(400);
    expect(problem.code).toBe('invalid_path');
    return undefined;
  }
}

describe('fuzz: normalizePath', () => {
  it('throws nothing but a domain refusal answered 400 invalid_path', () => {
    fc.assert(fc.property(rawPath, (raw) => {
      normalizedOrRefused(raw);
    }), { numRuns: PURE_RUNS * 2 });
  });

  it('output is canonical: starts with /, no //, no . or .. segment, no %2F, %5C or backslash', () => {
    fc.assert(fc.property(rawPath, (raw) => {
      const out = normalizedOrRefused(raw);
      if (out === undefined) return;
      expect(out.startsWith('/')).toBe(true);
      expect(out).not.toContain('//');
      expect(out.split('/').filter((s) => s === '.' || s === '..')).toEqual([]);
      expect(out).not.toMatch(/%2f|%5c|\\/i);
    }), { numRuns: PURE_RUNS * 2 });
  });

  it('is idempotent: normalizing the output again gives the same string (and does not refuse it)', () => {
    fc.assert(fc.property(rawPath, (raw) => {
      const out = normalizedOrRefused(raw);
      if (out === undefined) return;
      expect(normalizePath(out)).toBe(out);
    }), { numRuns: PURE_RUNS * 2 });
  });

  it('no double-encoded dot, slash, backslash or percent (%25 followed by 2E/2F/5C/25) survives', () => {
    fc.assert(fc.property(rawPath, (raw) => {
      const out = normalizedOrRefused(raw);
      if (out === undefined) return;
      expect(out).not.toMatch(/%25(2e|2f|5c|25)/i);
    }), { numRuns: PURE_RUNS * 2 });
  });
});

// -----------------------------------------------------------------------------------------------
// Through the running gateway: random Authorization values and raw request targets, never a 5xx.
// -----------------------------------------------------------------------------------------------

interface RawReply {
  status: number;
  contentType: string;
  body: string;
}

/** One raw request on a fresh connection (Connection: close), read to the end (at most 5 s). */
async function rawRequest(port: number, head: Buffer): Promise<RawReply> {
  const text = Buffer.from(await exchange(port, head, 5000), 'latin1').toString('utf8');
  const answer = parseAnswer(text);
  if (!text.startsWith('HTTP/1.1 ') || answer.status === 0 || !text.includes('\r\n\r\n')) {
    throw new Error(`no HTTP response to ${JSON.stringify(head.toString('latin1').slice(0, 300))}: ${JSON.stringify(text.slice(0, 200))}`);
  }
  return { status: answer.status, contentType: answer.headers['content-type']?.split(', ')[0] ?? '', body: answer.body };
}

function checkReply(r: RawReply, what: string): void {
  expect(r.status, `${what} → ${r.status} ${r.body}`).toBeLessThan(500);
  if (r.status >= 400) {
    expect(r.contentType, `${what} → ${r.status}`).toMatch(/^application\/problem\+json/);
    expect(typeof (JSON.parse(r.body) as { code?: unknown }).code).toBe('string');
  }
}

let token: string;
const gw = gatewayFixture({
  config: (f) => ({
    lockout: { maxFailuresPerUser: 100_000, addressBurst: 100_000, addressFailuresPerMinute: 6000, windowSeconds: 60 },
    upstreams: { up: { url: f.echo.url, timeoutMs: 2000 } },
    routes: [
      { path: '/v1/conversations', upstream: 'up', paging: { sortable: ['campaignId', 'createdAt'] } },
      { path: '/v1/contacts', upstream: 'up' },
    ],
  }),
});
beforeAll(async () => {
  token = (await createTokens(gw.base, 'alice', 'alice-pw')).accessToken;
});

/** Header bytes: anything but CR and LF (which would end the header rather than fill it). */
const headerValue = fc.oneof(
  authorizationHeader,
  // Mutations of a genuine token: truncated, one character changed, padded.
  fc.tuple(fc.nat(), fc.constantFrom('A', '-', '_', '.', '=', '', '\u00ff')).map(([i, ch]) => {
    const at = i % (token.length + 1);
    return `Bearer ${token.slice(0, at)}${ch}${token.slice(at + 1)}`;
  }),
  fc.nat({ max: 12_000 }).map((n) => `Bearer ${token}${'A'.repeat(n)}`),
).map((v) => v.replace(/[\r\n]/g, ''));

/** A request target without space, CR or LF (those end the request line). */
const target = fc.tuple(
  fc.constantFrom('/v1/conversations', '/v1/contacts', '/v1/tokens/create', '/healthz', '/readyz', '', '/', '//', '*', 'http://x', 'http://x/v1/contacts', '/v1/contactsX'),
  fc.array(fc.oneof(pathPiece, doubleEscape, fc.constantFrom('?', '&', '=', 'size=', 'page=', 'sort=', 'createdAt,desc', '10', '#', '+', '%26')), { maxLength: 12 }),
).map(([prefix, pieces]) => `${prefix}${pieces.join('')}`.replace(/[ \r\n\t]/g, '') || '/');

/** Why an upstream request path should never have been forwarded, or undefined. */
function escaped(url: string): string | undefined {
  const path = url.split('?', 1)[0]!;
  if (!/^\/v1\/(conversations|contacts)(\/|$)/.test(path)) return 'outside the route prefixes';
  if (path.split('/').some((s) => s === '.' || s === '..')) return 'a dot segment';
  if (/\\|%5c|%2f/i.test(path)) return 'a backslash or an encoded slash';
  return undefined;
}

describe('fuzz: through the running gateway', () => {
  it(`${GATEWAY_RUNS} random Authorization values → never a 5xx; every error a problem body`, async () => {
    await fc.assert(fc.asyncProperty(headerValue, async (value) => {
      const head = Buffer.concat([
        Buffer.from('GET /v1/contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: '),
        Buffer.from(value, 'utf8'),
        Buffer.from('\r\nConnection: close\r\n\r\n'),
      ]);
      checkReply(await rawRequest(gw.port, head), `Authorization: ${JSON.stringify(value.slice(0, 200))}`);
    }), { numRuns: GATEWAY_RUNS });
  }, 60_000);

  it(`${GATEWAY_RUNS} random raw paths and queries (valid Basic) → never a 5xx; upstream only sees paths inside a route`, async () => {
    const before = gw.echo.received.length;
    await fc.assert(fc.asyncProperty(target, async (t) => {
      const head = Buffer.from(`GET ${t} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basic('alice', 'alice-pw')}\r\nConnection: close\r\n\r\n`, 'utf8');
      checkReply(await rawRequest(gw.port, head), `GET ${t}`);
    }), { numRuns: GATEWAY_RUNS });
    const bad = gw.echo.received.slice(before).map((r) => [r.url, escaped(r.url)]).filter(([, why]) => why !== undefined);
    expect(bad).toEqual([]);
  }, 60_000);

  it('the gateway still answers /healthz with 200 afterwards', async () => {
    const r = await rawRequest(gw.port, Buffer.from('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'));
    expect(r.status).toBe(200);
  });
});
