import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { describedRequest } from '../../../src/authz/forward-auth-request.js';
import { DomainError } from '../../../src/core/domain-error.js';
import { toProblem } from '../../../src/http/errors.js';

function req(headers: Array<[string, string]>): IncomingMessage {
  return { rawHeaders: headers.flat() } as unknown as IncomingMessage;
}

function refusal(headers: Array<[string, string]>): { status: number; code: string } {
  try {
    describedRequest(req(headers));
  } catch (err) {
    if (err instanceof DomainError) {
      const problem = toProblem(err);
      return { status: problem.status, code: problem.code };
    }
    throw err;
  }
  throw new Error('not refused');
}

describe('the request a forward-auth call describes', () => {
  it('Traefik / Caddy: X-Forwarded-Method, -Uri, -Host, -Proto', () => {
    expect(describedRequest(req([
      ['X-Forwarded-Method', 'POST'], ['X-Forwarded-Uri', '/v1/reports/7?size=10&x=%20'],
      ['X-Forwarded-Host', 'api.example.com'], ['X-Forwarded-Proto', 'https'],
    ]))).toEqual({ method: 'POST', path: '/v1/reports/7', querystring: 'size=10&x=%20', host: 'api.example.com', proto: 'https' });
  });

  it('nginx: X-Original-Method and X-Original-URI', () => {
    expect(describedRequest(req([['X-Original-Method', 'DELETE'], ['X-Original-URI', '/v1/a']]))).toMatchObject({ method: 'DELETE', path: '/v1/a', querystring: '' });
  });

  it('both pairs present and agreeing: fine', () => {
    expect(describedRequest(req([
      ['X-Original-URI', '/v1/a'], ['X-Forwarded-Uri', '/v1/a'], ['X-Original-Method', 'GET'], ['X-Forwarded-Method', 'GET'],
    ])).path).toBe('/v1/a');
  });

  it('a path already in normal form is judged as written, the query with it', () => {
    expect(describedRequest(req([['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/v1/j%C3%A4ger/a;b/?q=%2e%2e/x']]))).toMatchObject({ path: '/v1/j%C3%A4ger/a;b/', querystring: 'q=%2e%2e/x' });
  });

  it('a malformed host is ignored, not believed; the scheme is read without regard to case', () => {
    const d = describedRequest(req([['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/a'], ['X-Forwarded-Host', 'a b/c'], ['X-Forwarded-Proto', 'HTTPS']]));
    expect(d.host).toBeUndefined();
    expect(d.proto).toBe('https');
  });

  // The proxy in front forwards the URI as written: a resolved spelling would judge another path than the one served.
  it.each([
    ['a # with dot segments after it (nginx and Caddy forward it as written)', '/api/admin/report#/../../items'],
    ['a # in the query', '/api/items?x=1#/../admin'],
    ['dot-dot segments', '/api/admin/users/../../items'],
    ['encoded dot-dot segments', '/api/admin/users/%2e%2e/%2e%2e/items'],
    ['a dot segment', '/v1/./admin'],
    ['repeated slashes', '/v1//admin'],
    ['a backslash', '/v1/admin\\x'],
    ['an encoded unreserved character', '/v1/%61dmin'],
    ['an escape in lower case', '/v1/j%c3%a4ger'],
  ])('refuses a URI not in normal form: %s (400 invalid_path)', (_name, uri) => {
    expect(refusal([['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', uri]])).toEqual({ status: 400, code: 'invalid_path' });
  });

  it.each(['gopher', 'ws', 'ftp', 'http2', 'https,http'])('refuses the scheme %s (400 invalid_request)', (proto) => {
    expect(refusal([['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/a'], ['X-Forwarded-Proto', proto]])).toEqual({ status: 400, code: 'invalid_request' });
  });

  it.each([
    ['no URI at all', [['X-Forwarded-Method', 'GET']], 'invalid_request'],
    ['no method (nginx\'s subrequest is always GET: its own method says nothing)', [['X-Original-URI', '/a']], 'invalid_request'],
    ['a client-added X-Forwarded-Uri that disagrees with nginx\'s X-Original-URI', [['X-Original-Method', 'GET'], ['X-Original-URI', '/admin'], ['X-Forwarded-Uri', '/public']], 'invalid_request'],
    ['methods that disagree', [['X-Original-Method', 'DELETE'], ['X-Forwarded-Method', 'GET'], ['X-Original-URI', '/a']], 'invalid_request'],
    ['a repeated header', [['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/a'], ['x-forwarded-uri', '/b']], 'invalid_request'],
    ['a method that is not a token', [['X-Forwarded-Method', 'GE T'], ['X-Forwarded-Uri', '/a']], 'invalid_request'],
    ['an absolute URI', [['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', 'http://evil/a']], 'invalid_path'],
    ['a URI with a space', [['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/a b']], 'invalid_path'],
    ['an encoded slash', [['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/v1/a%2fb']], 'invalid_path'],
    ['a climb above the root', [['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/../etc']], 'invalid_path'],
  ] as const)('refuses %s (400)', (_name, headers, code) => {
    expect(refusal(headers.map(([a, b]) => [a, b]))).toEqual({ status: 400, code });
  });
});
