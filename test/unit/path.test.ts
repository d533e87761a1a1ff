import { describe, expect, it } from 'vitest';
import { hasTrailingDotsOrSpaces, normalizePath, requireNormalPath, withoutPathParameters, withoutTrailingDotsAndSpaces } from '../../src/core/path.js';
import { HttpProblem } from '../../src/http/problem.js';
import { refusalOf } from '../support/refusal.js';
import { isTokenPath } from '../../src/http/request-form.js';

/** [description, raw path, normalized path]. */
const normalized: [string, string, string][] = [
  ['root', '/', '/'],
  ['plain path unchanged', '/v1/contacts', '/v1/contacts'],
  ['trailing slash kept', '/v1/contacts/', '/v1/contacts/'],
  ['"." segment removed', '/v1/./contacts', '/v1/contacts'],
  ['".." segment climbs one', '/v1/conversations/../contacts', '/v1/contacts'],
  ['several ".." segments', '/v1/a/b/../../contacts', '/v1/contacts'],
  ['"." as the last segment leaves a trailing slash', '/v1/contacts/.', '/v1/contacts/'],
  ['".." as the last segment leaves a trailing slash', '/v1/contacts/..', '/v1/'],
  ['".." back to the root', '/v1/..', '/'],
  ['%2e%2e is ".."', '/v1/conversations/%2e%2e/contacts', '/v1/contacts'],
  ['%2E%2e (mixed case) is ".."', '/v1/conversations/%2E%2e/contacts', '/v1/contacts'],
  ['.%2e (half encoded) is ".."', '/v1/conversations/.%2e/contacts', '/v1/contacts'],
  ['%2e is "."', '/v1/%2e/contacts', '/v1/contacts'],
  ['repeated slashes collapsed', '//v1//contacts', '/v1/contacts'],
  ['many repeated slashes, trailing kept once', '/v1///contacts//', '/v1/contacts/'],
  ['"..." is not a dot segment', '/v1/...', '/v1/...'],
  ['"..a" is not a dot segment', '/v1/..a/b', '/v1/..a/b'],
  ['"a.." is not a dot segment', '/v1/a../b', '/v1/a../b'],
  ['%41 (unreserved A) decoded', '/v1/%41bc', '/v1/Abc'],
  ['unreserved digits, -, _, ~ decoded', '/v1/%31%2d%5f%7e%2E', '/v1/1-_~.'],
  ['%c3%a4 (ä) upper-cased, not decoded', '/v1/j%c3%a4ger', '/v1/j%C3%A4ger'],
  ['%20 kept encoded', '/v1/a%20b', '/v1/a%20b'],
  ['reserved %3f / %23 kept encoded, upper-cased', '/v1/a%3fb%23c', '/v1/a%3Fb%23c'],
  ['%25 (an encoded percent) kept', '/v1/100%25', '/v1/100%25'],
  ['%25 followed by a non-special pair kept', '/v1/%2541', '/v1/%2541'],
  ['segment with a semicolon left alone', '/v1/a;b=c', '/v1/a;b=c'],
  ['encoded dot inside a segment', '/v1/file%2ejson', '/v1/file.json'],
];

/** [description, raw path] each refused with 400 invalid_path. */
const refused: [string, string][] = [
  ['%2F (encoded slash)', '/v1/contacts/%2F..'],
  ['%2f (encoded slash, lower case)', '/v1/contacts%2f..%2fadmin'],
  ['%5C (encoded backslash)', '/v1/x/..%5C..'],
  ['%5c (encoded backslash, lower case)', '/v1/x/..%5c..'],
  ['raw backslash', '/v1/x/..\\..'],
  ['%00 (encoded NUL)', '/v1/contacts%00.json'],
  ['%252e (double-encoded dot)', '/v1/conversations/%252e%252e/contacts'],
  ['%252E (double-encoded dot, upper case)', '/v1/%252E%252E/x'],
  ['%252f (double-encoded slash)', '/v1/contacts/%252f..'],
  ['%255c (double-encoded backslash)', '/v1/contacts/%255c..'],
  ['%2525 (double-encoded percent)', '/v1/contacts/%25252e'],
  // One decoding step (%32 → 2, %65 → e, both unreserved) turns this into %252e%252e, refused above.
  ['%25%32%65 (double-encoded dot via encoded unreserved characters)', '/v1/contacts/%25%32%65%25%32%65/x'],
  ['%25%32%66 (double-encoded slash via encoded unreserved characters)', '/v1/contacts/%25%32%66/x'],
  ['bad escape %zz', '/v1/%zz'],
  ['truncated escape %4 at the end', '/v1/%4'],
  ['truncated escape %4 before a slash', '/v1/%4/x'],
  ['bad escape %4g', '/v1/%4g'],
  ['lone %', '/v1/%'],
  ['a dot-dot segment with a trailing space', '/v1/x/..%20/admin'],
  ['a dot-dot segment with an encoded dot and a space', '/v1/x/%2e%2e%20/admin'],
  ['a dot segment with a trailing space', '/v1/.%20/admin'],
  ['a dot segment with a space between dots', '/v1/x/.%20./admin'],
  ['a dot-dot segment with a trailing tab', '/v1/x/..%09'],
  ['".." above the root', '/..'],
  ['".." above the root after a descent', '/v1/../..'],
  ['%2e%2e above the root', '/%2e%2e/etc/passwd'],
  ['".." above the root deep', '/v1/contacts/../../../etc/passwd'],
  ['not starting with /', 'v1/contacts'],
  ['empty', ''],
  ['asterisk form', '*'],
];

describe('normalizePath (DESIGN "Forwarding": one spelling per path)', () => {
  it.each(normalized)('%s: %j → %j', (_description, raw, expected) => {
    expect(normalizePath(raw)).toBe(expected);
  });

  it.each(normalized)('normalizing again changes nothing: %s', (_description, raw) => {
    const once = normalizePath(raw);
    expect(normalizePath(once)).toBe(once);
  });

  it.each(refused)('refuses %s: %j → 400 invalid_path', (_description, raw) => {
    let result: string | undefined;
    const thrown = refusalOf(() => (result = normalizePath(raw)));
    expect(thrown, `expected a refusal, got ${JSON.stringify(result)}`).toBeInstanceOf(HttpProblem);
    expect(thrown!.status).toBe(400);
    expect(thrown!.code).toBe('invalid_path');
    expect(thrown!.message.length).toBeGreaterThan(0);
  });
});

describe('isTokenPath', () => {
  it.each([
    '/v1/tokens', '/v1/tokens/', '/v1/tokens/create', '/V1/TOKENS/create', '/v1/Tokens', '/v1/tokens;x/create',
    '/v1/tokens%3Bx/create', '/v1/tokens%3bx=1', '/v1;x/tokens/create', '/v1%3B/tokens', '/v1/tokens;',
  ])('%s is a token path', (path) => expect(isTokenPath(path)).toBe(true));
  it.each(['/v1/tokensX', '/v1/tokenz', '/v1', '/v1/', '/v1/conversations', '/tokens', '/v2/tokens', '/v1/x/tokens', '/v10/tokens', '/v1/token'])(
    '%s is not a token path', (path) => expect(isTokenPath(path)).toBe(false));
});

describe('requireNormalPath (a forward-auth description: judged only when already canonical)', () => {
  it.each(['/', '/api/items', '/api/items/', '/api/a;b', '/api/j%C3%A4ger', '/api/a%20b', '/api/...', '/api/.well-known/x', '/api/100%25'])(
    '%s is in normal form: returned as it is', (path) => expect(requireNormalPath(path)).toBe(path));

  it.each([
    ['a fragment left in the path', '/api/admin/report#/../../items'],
    ['a bare #', '/api/items#'],
    ['dot-dot segments', '/api/admin/users/../../items'],
    ['encoded dot-dot segments', '/api/admin/users/%2e%2e/%2e%2e/items'],
    ['a half-encoded dot-dot', '/api/admin/.%2E/items'],
    ['a dot segment', '/api/./admin'],
    ['a trailing dot segment', '/api/admin/.'],
    ['repeated slashes', '/api//admin'],
    ['a leading double slash', '//api/admin'],
    ['an escaped unreserved letter', '/api/%61dmin'],
    ['an escaped dot inside a segment', '/api/file%2ejson'],
    ['an escape in lower case', '/api/j%c3%a4ger'],
    ['an encoded slash', '/api/admin%2f..%2fitems'],
    ['a backslash', '/api/admin\\..\\items'],
    ['an encoded backslash', '/api/admin%5c..'],
    ['a dot segment with parameters', '/api/admin/..;/items'],
    ['a climb above the root', '/../api'],
  ])('refuses %s: %j → 400 invalid_path', (_description, path) => {
    expect(refusalOf(() => requireNormalPath(path))).toMatchObject({ status: 400, code: 'invalid_path' });
  });
});

describe('withoutPathParameters (the servlet containers\' reading of a path)', () => {
  it.each([
    ['/api/admin;jsessionid=1/report', '/api/admin/report'],
    ['/api/admin;x', '/api/admin'],
    ['/api/;x/admin', '/api/admin'],
    ['/a;b;c/d;e', '/a/d'],
    ['/;x', '/'],
    ['/api/admin%3Bx', '/api/admin%3Bx'],
    ['/plain/path', '/plain/path'],
  ])('%s → %s', (path, expected) => {
    expect(withoutPathParameters(path)).toBe(expected);
  });
});

describe('withoutTrailingDotsAndSpaces (the IIS and ASP.NET reading of a path)', () => {
  it.each([
    ['/api/admin./report', '/api/admin/report'],
    ['/api/admin%20/report', '/api/admin/report'],
    ['/api/admin.%20.%20/report', '/api/admin/report'],
    ['/api/admin%09%0D%C2%A0%C2%85', '/api/admin'],
    ['/api/admin../', '/api/admin/'],
    ['/api/%20/admin', '/api/admin'],
    ['/api/.../admin', '/api/admin'],
    ['/%20', '/'],
    ['/api/file.json/x', '/api/file.json/x'],
    ['/api/a%20b', '/api/a%20b'],
    ['/api/a%2520', '/api/a%2520'],
  ])('%s → %s', (path, expected) => {
    expect(withoutTrailingDotsAndSpaces(path)).toBe(expected);
    expect(hasTrailingDotsOrSpaces(path)).toBe(path !== expected);
  });
});
