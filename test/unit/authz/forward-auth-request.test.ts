import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { describedRequest } from '../../../src/authz/forward-auth-request.js';
import { HttpProblem } from '../../../src/http/problem.js';

function req(headers: Array<[string, string]>): IncomingMessage {
  return { rawHeaders: headers.flat() } as unknown as IncomingMessage;
}

function refusal(headers: Array<[string, string]>): { status: number; code: string } {
  try {
    describedRequest(req(headers));
  } catch (err) {
    if (err instanceof HttpProblem) return { status: err.status, code: err.code };
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

  it('the path is normalized as the gateway normalizes its own: dot segments, encoded dots, double slashes', () => {
    expect(describedRequest(req([['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/v1/public/%2e%2e//admin/./x']])).path).toBe('/v1/admin/x');
  });

  it('a malformed host or scheme is ignored, not believed', () => {
    const d = describedRequest(req([['X-Forwarded-Method', 'GET'], ['X-Forwarded-Uri', '/a'], ['X-Forwarded-Host', 'a b/c'], ['X-Forwarded-Proto', 'gopher']]));
    expect(d.host).toBeUndefined();
    expect(d.proto).toBeUndefined();
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
