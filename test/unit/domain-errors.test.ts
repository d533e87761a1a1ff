import { describe, expect, it } from 'vitest';
import { authenticate } from '../../src/auth/authenticate.js';
import type { Authenticator } from '../../src/auth/authenticator.js';
import { BASIC_CHALLENGE } from '../../src/auth/basic.js';
import { DomainError, type DomainCode } from '../../src/core/domain-error.js';
import type { Exchange } from '../../src/core/exchange.js';
import { HttpProblem } from '../../src/http/problem.js';
import { DOMAIN_ANSWERS, toProblem } from '../../src/http/errors.js';
import { StoreUnavailableError } from '../../src/stores/store-contracts.js';
import { refusalOf } from '../support/refusal.js';

/** Every domain code, spelled out here so a new one must be decided on in the table and in this test. */
const CODES: Record<DomainCode, [status: number, problem: string]> = {
  missing_credentials: [401, 'missing_credentials'],
  invalid_credentials: [401, 'invalid_credentials'],
  credentials_not_accepted: [401, 'invalid_credentials'],
  invalid_token: [401, 'invalid_token'],
  token_expired: [401, 'token_expired'],
  malformed_bearer: [401, 'invalid_token'],
  invalid_provider_token: [401, 'invalid_token'],
  provider_token_expired: [401, 'token_expired'],
  session_ended: [401, 'invalid_token'],
  session_expired: [401, 'token_expired'],
  invalid_refresh_token: [401, 'invalid_refresh_token'],
  too_many_attempts: [429, 'too_many_attempts'],
  invalid_request: [400, 'invalid_request'],
  invalid_path: [400, 'invalid_path'],
  invalid_page_size: [400, 'invalid_page_size'],
  invalid_page: [400, 'invalid_page'],
  invalid_sort: [400, 'invalid_sort'],
  not_found: [404, 'not_found'],
  forbidden: [403, 'forbidden'],
  identity_provider_unavailable: [503, 'identity_provider_unavailable'],
  provider_answer_unusable: [502, 'bad_gateway'],
  verifications_busy: [503, 'service_unavailable'],
  upstream_busy: [503, 'service_unavailable'],
  store_unavailable: [503, 'store_unavailable'],
  directory_unavailable: [503, 'directory_unavailable'],
};

describe('domain errors → problems (the one table)', () => {
  it('maps every domain code to its status and problem code, keeping the detail', () => {
    expect(Object.keys(DOMAIN_ANSWERS).sort()).toEqual(Object.keys(CODES).sort());
    for (const [code, [status, problem]] of Object.entries(CODES) as Array<[DomainCode, [number, string]]>) {
      const answer = toProblem(new DomainError(code, `why ${code}`));
      expect(answer).toBeInstanceOf(HttpProblem);
      expect([answer.status, answer.code]).toEqual([status, problem]);
      if (code !== 'store_unavailable') expect(answer.message).toBe(`why ${code}`);
    }
  });

  it('answers Retry-After from the error itself, and none when it has no time', () => {
    expect(toProblem(new DomainError('too_many_attempts', 'locked', { retryAfterSeconds: 17 })).headers).toEqual({ 'Retry-After': '17' });
    expect(toProblem(new DomainError('upstream_busy', 'full', { retryAfterSeconds: 1 })).headers['Retry-After']).toBe('1');
    expect(toProblem(new DomainError('invalid_refresh_token', 'used')).headers).toEqual({});
  });

  it('a store outage reads the same everywhere: 503 store_unavailable, Retry-After: 1, nothing internal', () => {
    const answer = toProblem(new StoreUnavailableError(new Error('ECONNREFUSED 127.0.0.1:6379')));
    expect([answer.status, answer.code, answer.headers['Retry-After']]).toEqual([503, 'store_unavailable', '1']);
    expect(answer.message).not.toMatch(/ECONNREFUSED|6379/);
  });

  it('a refused bearer token says why in its challenge (RFC 6750 §3.1)', () => {
    expect(toProblem(new DomainError('invalid_token', 'the access token has been revoked')).headers['WWW-Authenticate'])
      .toBe('Bearer realm="auth-gateway", error="invalid_token", error_description="the access token has been revoked"');
    expect(toProblem(new DomainError('token_expired', 'the access token has expired; use POST /v1/tokens/refresh')).headers['WWW-Authenticate'])
      .toMatch(/error="invalid_token", error_description="the access token has expired"$/);
  });

  it('a provider\'s token, a malformed bearer header and a browser session each answer with their own challenge (or none)', () => {
    const challenge = (code: DomainCode) => {
      const err = new DomainError(code, 'why');
      err.challenge = 'Bearer realm="auth-gateway"';
      return toProblem(err).headers['WWW-Authenticate'];
    };
    expect(challenge('invalid_provider_token')).toBe('Bearer realm="auth-gateway", error="invalid_token"');
    expect(challenge('provider_token_expired')).toBe('Bearer realm="auth-gateway", error="invalid_token", error_description="expired"');
    expect(challenge('malformed_bearer')).toBe('Bearer realm="auth-gateway", error="invalid_request"');
    expect(challenge('session_ended')).toBeUndefined();
    expect(challenge('session_expired')).toBeUndefined();
  });

  it('no credentials: every source\'s challenge, one header line each', () => {
    const challenges = [BASIC_CHALLENGE, 'Bearer realm="auth-gateway"'];
    const ex = { req: { headers: {} }, repeatedAuthorization: false } as unknown as Exchange;
    const sources = challenges.map((challenge, i): Authenticator<string> => ({
      via: `s${i}`, scheme: i === 0 ? 'basic' : 'bearer', challenge, securityScheme: { name: `s${i}`, scheme: {} },
      parse: () => undefined, verify: () => { throw new Error('not asked'); }, recheck: () => undefined,
    }));
    const answer = refusalOf(() => authenticate(sources)(ex))!;
    expect([answer.status, answer.code, answer.headers['WWW-Authenticate']]).toEqual([401, 'missing_credentials', challenges]);
  });

  it('a refusal\'s details are members of the problem body', () => {
    const answer = toProblem(new DomainError('invalid_page_size', 'size must be one of 10, 20', { details: { allowed: [10, 20] } }));
    expect(answer.toBody()).toEqual({ allowed: [10, 20], type: 'urn:auth-gateway:problem:invalid_page_size', title: 'Bad Request', status: 400, detail: 'size must be one of 10, 20', code: 'invalid_page_size' });
  });

  it('a wrong password carries the challenge of the source that refused it, and none outside authenticate (token endpoints)', async () => {
    expect(toProblem(new DomainError('invalid_credentials', 'wrong')).headers['WWW-Authenticate']).toBeUndefined();

    const refusing: Authenticator<string> = {
      via: 'test', scheme: 'basic', challenge: BASIC_CHALLENGE, securityScheme: { name: 'test', scheme: { type: 'http', scheme: 'basic' } },
      parse: (req) => req.headers.authorization,
      verify: () => Promise.reject(new DomainError('invalid_credentials', 'the user name or password is wrong')),
      recheck: () => undefined,
    };
    const ex = { req: { headers: { authorization: 'Basic eDp5' } }, repeatedAuthorization: false } as unknown as Exchange;
    const err: unknown = await Promise.resolve(authenticate([refusing])(ex)).catch((e: unknown) => e);
    const answer = toProblem(err);
    expect([answer.status, answer.code, answer.headers['WWW-Authenticate']]).toEqual([401, 'invalid_credentials', BASIC_CHALLENGE]);
    // A lockout through the same authenticator is a 429: no challenge, its own Retry-After.
    refusing.verify = () => { throw new DomainError('too_many_attempts', 'locked', { retryAfterSeconds: 30 }); };
    let thrown: unknown;
    try {
      void authenticate([refusing])(ex);
    } catch (e) {
      thrown = e;
    }
    const locked = toProblem(thrown);
    expect([locked.status, locked.headers['WWW-Authenticate'], locked.headers['Retry-After']]).toEqual([429, undefined, '30']);
  });
});
