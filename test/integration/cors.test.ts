import { request, type IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { ConfigError } from '../../src/config/config-error.js';
import { basic, createTokens, gatewayFixture, testConfig } from '../support/fixtures.js';

const APP = 'https://app.example.com';
const EVIL = 'https://evil.example.net';

const gw = gatewayFixture({
  before: (f) => {
    // An upstream with CORS opinions of its own: the gateway's policy must win where it has one.
    f.echo.handler = (_req, res, r) => {
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.setHeader('Vary', 'Accept-Encoding');
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(r));
    };
  },
  config: (f) => ({
    tokens: { signing: { alg: 'HS256', secret: 'test-secret-test-secret-test-secret-0123456789' }, cors: { origins: [APP] } },
    upstreams: { up: { url: f.echo.url } },
    routes: [
      { path: '/v1/list', upstream: 'up', cors: { origins: [APP, 'http://localhost:3000'], credentials: true, maxAge: 120 } },
      { path: '/v1/public', upstream: 'up', cors: { origins: '*', methods: ['GET'], headers: ['authorization'], exposedHeaders: [] } },
      { path: '/v1/plain', upstream: 'up' },
    ],
  }),
});

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function send(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gw.port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const preflight = (path: string, origin: string, method: string, requestHeaders?: string) =>
  send('OPTIONS', path, { origin, 'access-control-request-method': method, ...(requestHeaders ? { 'access-control-request-headers': requestHeaders } : {}) });

const corsHeaders = (h: IncomingHttpHeaders) => Object.keys(h).filter((n) => n.startsWith('access-control-'));
const vary = (h: IncomingHttpHeaders) => String(h.vary ?? '').split(',').map((v) => v.trim().toLowerCase());

function expectProblem(r: Answer, status: number, code: string): void {
  expect(r.status, r.body).toBe(status);
  expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(JSON.parse(r.body)).toMatchObject({ status, code });
}

describe('CORS on the token endpoints (tokens.cors)', () => {
  it('answers a preflight from a listed origin without credentials (204), and the POST that follows carries Allow-Origin', async () => {
    const pre = await preflight('/v1/tokens/create', APP, 'POST', 'content-type');
    expect(pre.status).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe(APP);
    expect(pre.headers['access-control-allow-methods']).toBe('POST');
    expect(pre.headers['access-control-allow-headers']).toContain('content-type');
    expect(pre.headers['access-control-max-age']).toBe('600');
    expect(pre.headers['access-control-allow-credentials']).toBeUndefined();
    expect(vary(pre.headers)).toEqual(expect.arrayContaining(['origin', 'access-control-request-method', 'access-control-request-headers']));

    const created = await send('POST', '/v1/tokens/create', { origin: APP, 'content-type': 'application/json' }, JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }));
    expect(created.status).toBe(200);
    expect(created.headers['access-control-allow-origin']).toBe(APP);
    expect(created.headers['access-control-expose-headers']).toContain('X-Request-Id');
    expect(vary(created.headers)).toContain('origin');
    // A wrong password: the page can read the 401 problem.
    const wrong = await send('POST', '/v1/tokens/create', { origin: APP, 'content-type': 'application/json' }, JSON.stringify({ appKey: 'alice', appSecret: 'nope' }));
    expectProblem(wrong, 401, 'invalid_credentials');
    expect(wrong.headers['access-control-allow-origin']).toBe(APP);
  });

  it('refuses preflights from unlisted origins, for other methods and for other headers (403 problem), echoing nothing', async () => {
    for (const r of [
      await preflight('/v1/tokens/create', EVIL, 'POST'),
      await preflight('/v1/tokens/create', APP, 'DELETE'),
      await preflight('/v1/tokens/create', APP, 'POST', 'content-type, x-custom'),
    ]) {
      expectProblem(r, 403, 'cors_not_allowed');
      expect(corsHeaders(r.headers)).toEqual([]);
      expect(vary(r.headers)).toContain('origin');
    }
    const evil = await send('POST', '/v1/tokens/create', { origin: EVIL, 'content-type': 'application/json' }, JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }));
    expect(evil.status).toBe(200);
    expect(corsHeaders(evil.headers)).toEqual([]);
  });
});

describe('CORS on routes (routes[].cors)', () => {
  it('answers the preflight itself: no credentials needed, nothing forwarded', async () => {
    const before = gw.echo.received.length;
    const pre = await preflight('/v1/list/items?size=10', APP, 'DELETE', 'Authorization, X-Request-Id');
    expect(pre.status).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe(APP);
    expect(pre.headers['access-control-allow-credentials']).toBe('true');
    expect(pre.headers['access-control-allow-methods']).toBe('GET, HEAD, POST, PUT, PATCH, DELETE');
    expect(pre.headers['access-control-max-age']).toBe('120');
    expect(gw.echo.received.length).toBe(before);
  });

  it('a listed origin gets the gateway\'s headers on the upstream\'s answer, the upstream\'s own replaced; Vary keeps both', async () => {
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    const r = await send('GET', '/v1/list', { origin: 'http://localhost:3000', authorization: `Bearer ${accessToken}` });
    expect(r.status).toBe(200);
    expect(r.headers['access-control-allow-origin']).toBe('http://localhost:3000');
    expect(r.headers['access-control-allow-credentials']).toBe('true');
    expect(r.headers['access-control-expose-headers']).toBe('X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After, WWW-Authenticate');
    expect(vary(r.headers)).toEqual(expect.arrayContaining(['accept-encoding', 'origin']));
    // The upstream saw the request as usual (Origin included: it is the client's).
    expect(gw.echo.received.at(-1)!.headers.origin).toBe('http://localhost:3000');
  });

  it('an unlisted origin gets no CORS header at all, not even the upstream\'s *', async () => {
    const r = await send('GET', '/v1/list', { origin: EVIL, authorization: basic('alice', 'alice-pw') });
    expect(r.status).toBe(200);
    expect(corsHeaders(r.headers)).toEqual([]);
    expect(vary(r.headers)).toContain('origin');
  });

  it('a 401 to a listed origin is readable by the page', async () => {
    const r = await send('GET', '/v1/list', { origin: APP });
    expectProblem(r, 401, 'missing_credentials');
    expect(r.headers['access-control-allow-origin']).toBe(APP);
    expect(r.headers['access-control-expose-headers']).toContain('WWW-Authenticate');
  });

  it('origins: * answers * (never with credentials), and its own method and header lists', async () => {
    const pre = await preflight('/v1/public', 'https://anyone.example', 'GET', 'authorization');
    expect(pre.status).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe('*');
    expect(pre.headers['access-control-allow-credentials']).toBeUndefined();
    expectProblem(await preflight('/v1/public', 'https://anyone.example', 'POST'), 403, 'cors_not_allowed');
    const r = await send('GET', '/v1/public', { origin: 'https://anyone.example', authorization: basic('alice', 'alice-pw') });
    expect(r.headers['access-control-allow-origin']).toBe('*');
    expect(r.headers['access-control-expose-headers']).toBeUndefined();
  });

  it('a route without a cors block is left alone: the preflight needs credentials, the upstream\'s headers pass', async () => {
    expectProblem(await preflight('/v1/plain', APP, 'GET'), 401, 'missing_credentials');
    const r = await send('GET', '/v1/plain', { origin: EVIL, authorization: basic('alice', 'alice-pw') });
    expect(r.headers['access-control-allow-origin']).toBe('*');
  });

  it('a WebSocket handshake from an unlisted origin is refused on a route with a cors block (403)', async () => {
    const status = (origin: string) => new Promise<number>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/list`, { headers: { authorization: basic('alice', 'alice-pw'), origin } });
      ws.once('unexpected-response', (_req, res) => {
        resolve(res.statusCode!);
        res.resume();
      });
      // The echo upstream is no WebSocket server: a listed origin gets as far as the upstream's 200.
      ws.once('error', () => {});
    });
    expect(await status(EVIL)).toBe(403);
    expect(await status(APP)).toBe(200);
  });
});

describe('cross-site requests with Basic credentials (CSRF)', () => {
  const ALICE = basic('alice', 'alice-pw');
  const own = () => `http://127.0.0.1:${gw.port}`;
  /** The status, and whether the upstream saw the request. */
  async function judged(method: string, path: string, headers: Record<string, string>): Promise<{ status: number; forwarded: boolean }> {
    const before = gw.echo.received.length;
    const r = await send(method, path, headers, method === 'POST' || method === 'PUT' ? 'a=1' : undefined);
    if (r.status === 403) expectProblem(r, 403, 'cors_not_allowed');
    return { status: r.status, forwarded: gw.echo.received.length > before };
  }

  it('a browser\'s cross-site POST, PUT, PATCH or DELETE with Basic is refused (403) and never forwarded', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      for (const path of ['/v1/plain', '/v1/list', '/v1/public']) {
        for (const headers of [{ origin: EVIL }, { origin: 'null' }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: EVIL, 'sec-fetch-site': 'cross-site' }] as Record<string, string>[]) {
          expect(await judged(method, path, { authorization: ALICE, ...headers }), `${method} ${path} ${JSON.stringify(headers)}`).toEqual({ status: 403, forwarded: false });
        }
      }
    }
  });

  it('allowed: the gateway\'s own origin, an origin the route lists by name, no Origin and no Sec-Fetch-Site (curl, servers), safe methods, Bearer', async () => {
    const ok = { status: 200, forwarded: true };
    expect(await judged('POST', '/v1/plain', { authorization: ALICE })).toEqual(ok);
    expect(await judged('DELETE', '/v1/plain', { authorization: ALICE })).toEqual(ok);
    expect(await judged('POST', '/v1/plain', { authorization: ALICE, origin: own(), 'sec-fetch-site': 'same-origin' })).toEqual(ok);
    expect(await judged('POST', '/v1/plain', { authorization: ALICE, 'sec-fetch-site': 'same-origin' })).toEqual(ok);
    expect(await judged('POST', '/v1/plain', { authorization: ALICE, 'sec-fetch-site': 'none' })).toEqual(ok);
    expect(await judged('POST', '/v1/list', { authorization: ALICE, origin: APP, 'sec-fetch-site': 'cross-site' })).toEqual(ok);
    for (const method of ['GET', 'HEAD', 'OPTIONS']) {
      expect(await judged(method, '/v1/plain', { authorization: ALICE, origin: EVIL, 'sec-fetch-site': 'cross-site' }), method).toEqual(ok);
    }
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    expect(await judged('POST', '/v1/plain', { authorization: `Bearer ${accessToken}`, origin: EVIL, 'sec-fetch-site': 'cross-site' })).toEqual(ok);
  });

  it('an origin listed on another route, or the own origin on another port or scheme, is not this route\'s', async () => {
    expect((await judged('POST', '/v1/plain', { authorization: ALICE, origin: APP })).status).toBe(403);
    expect((await judged('POST', '/v1/plain', { authorization: ALICE, origin: `https://127.0.0.1:${gw.port}` })).status).toBe(403);
    expect((await judged('POST', '/v1/plain', { authorization: ALICE, origin: 'http://127.0.0.1' })).status).toBe(403);
  });
});

describe('CORS configuration', () => {
  const load = (cors: unknown, where: 'route' | 'tokens' = 'route') => () => testConfig(gw.users.file, where === 'route'
    ? { upstreams: { up: { url: 'http://127.0.0.1:1' } }, routes: [{ path: '/v1/x', upstream: 'up', cors }] }
    : { tokens: { signing: { alg: 'HS256', secret: 'test-secret-test-secret-test-secret-0123456789' }, cors } });

  it('names each problem', () => {
    const problems = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        if (err instanceof ConfigError) return err.message;
      }
      return 'no problem';
    };
    expect(problems(load({ origins: '*', credentials: true }))).toMatch(/routes\[0\]\.cors\.origins must list exact origins when credentials is true/);
    expect(problems(load({ origins: ['https://app.example.com/'] }))).toMatch(/routes\[0\]\.cors\.origins\[0\] must be an origin/);
    expect(problems(load({ origins: ['app.example.com'] }))).toMatch(/routes\[0\]\.cors\.origins\[0\] must be an origin/);
    expect(problems(load({}))).toMatch(/routes\[0\]\.cors\.origins is required/);
    expect(problems(load({ origins: [APP], maxAge: -1 }))).toMatch(/routes\[0\]\.cors\.maxAge must be/);
    expect(problems(load({ origins: [APP], allowAll: true }, 'tokens'))).toMatch(/tokens\.cors\.allowAll is not a known setting/);
    expect(problems(load({ origins: [APP], methods: ['GET POST'] }))).toMatch(/routes\[0\]\.cors\.methods\[0\] must be a header or method name/);
  });

  it('fills the defaults', () => {
    expect(load({ origins: [APP] })().routes[0]!.cors).toEqual({
      origins: [APP], methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'], headers: ['authorization', 'content-type', 'x-request-id'],
      exposedHeaders: ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'WWW-Authenticate'],
      credentials: false, maxAgeSeconds: 600,
    });
    expect(load({ origins: [APP] }, 'tokens')().tokens.cors!.methods).toEqual(['POST']);
  });
});
