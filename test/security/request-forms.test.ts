import { describe, expect, it } from 'vitest';
import { OVERRIDE_HEADERS } from '../../src/core/headers.js';
import { basic, gatewayFixture, type Received } from '../support/fixtures.js';
import { exchange, openRaw, parseAnswer } from '../support/raw-client.js';

// =============================================================================================
// Request forms and header trust, as a black-box attack pass tried them: raw sockets, a recording
// upstream. One row per finding; each says what must come back and what the upstream may receive.
// A catch-all route under /v1 makes every path reachable, so only the gateway's own rules stand
// between a probe and the upstream. The logs of the whole table are kept and searched for secrets.
// =============================================================================================

const ALICE = basic('alice', 'alice-pw');
const SECRET_QUERY = 'token=qs-secret-4711';
const USERINFO = 'leaky-user:leaky-pass';

const gw = gatewayFixture({
  log: 'debug',
  config: (f) => ({
    server: { host: '127.0.0.1', port: 0, headersTimeoutMs: 1000, bodyTimeoutMs: 1000 },
    upstreams: { up: { url: f.echo.url, timeouts: { idleMs: 600 } } },
    routes: [
      { path: '/v1/override', upstream: 'up', allowHeaders: ['x-http-method-override'] },
      { path: '/v1', upstream: 'up' },
    ],
    log: { level: 'debug', access: true },
  }),
});
/** Every line the gateway logged while the table ran. */
const logLines = gw.logs;

// ---------------------------------------------------------------------------------------------
// The raw client (test/support/raw-client.ts): it can wait between writes and tell what arrived when.
// ---------------------------------------------------------------------------------------------

const open = () => openRaw(gw.port);

/** Sends bytes on a fresh connection and reads until the gateway closes it (Connection: close), at most 3 s. */
const send = (bytes: string) => exchange(gw.port, bytes);

function statusOf(answer: string): number {
  return parseAnswer(answer).status;
}

function problemOf(answer: string): { code?: string; status?: number } {
  expect(answer).toMatch(/content-type: application\/problem\+json/i);
  return JSON.parse(parseAnswer(answer).body) as { code?: string; status?: number };
}

const settle = () => new Promise((r) => setTimeout(r, 100));

interface Row {
  name: string;
  probe: () => Promise<string>;
  status: number;
  code?: string;
  /** For requests that must pass: checks the one request the upstream received. */
  upstream?: (r: Received) => void;
}

const get = (target: string, headers = `Authorization: ${ALICE}\r\n`) => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}Connection: close\r\n\r\n`;
const post = (target: string, body: string, headers = '') =>
  `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers}Connection: close\r\n\r\n${body}`;
const CREATE_BODY = JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' });

/** A token path spelled another way must never reach the catch-all route's upstream. */
const tokenSpelling = (method: 'GET' | 'POST', target: string): Row => ({
  name: `tokens: ${method} ${target} is answered by the gateway (404), never forwarded`,
  probe: () => send(method === 'GET' ? get(target) : post(target, CREATE_BODY, `Authorization: ${ALICE}\r\n`)),
  status: 404,
  code: 'not_found',
});

const ROWS: Row[] = [
  // ------------------------------------------------------------------------- /v1/tokens
  tokenSpelling('POST', '/v1/Tokens/create'),
  tokenSpelling('POST', '/V1/tokens/create'),
  tokenSpelling('POST', '/v1/TOKENS/create'),
  tokenSpelling('POST', '/v1/tokens/CREATE'),
  tokenSpelling('POST', '/v1/tokens/create/'),
  tokenSpelling('POST', '/v1/tokens;x/create'),
  tokenSpelling('POST', '/v1/tokens%3Bx/create'),
  tokenSpelling('POST', '/v1/tokens%3bx=1/create'),
  tokenSpelling('POST', '/v1;x/tokens/create'),
  tokenSpelling('GET', '/v1/tokens'),
  // IIS and ASP.NET drop a segment's trailing dots and spaces: these are /v1/tokens/create to them.
  tokenSpelling('POST', '/v1/tokens./create'),
  tokenSpelling('POST', '/v1./tokens/create'),
  tokenSpelling('POST', '/v1/tokens%20/create'),
  tokenSpelling('POST', '/v1%20./tokens.%20/create'),
  tokenSpelling('GET', '/v1/Tokens'),
  tokenSpelling('GET', '/v1/tokens/revoke/../other'),
  tokenSpelling('GET', '/v1/tokens;/create'),
  {
    name: 'tokens: /v1/%74okens/create is /v1/tokens/create once normalized: served by the gateway',
    probe: () => send(post('/v1/%74okens/create', CREATE_BODY)),
    status: 200,
  },
  {
    name: 'control: /v1/tokensX is an ordinary path under the catch-all route',
    probe: () => send(get('/v1/tokensX')),
    status: 200,
    upstream: (r) => expect(r.url).toBe('/v1/tokensX'),
  },

  // --------------------------------------------------------------------------- methods
  { name: 'methods: TRACE → 405, never forwarded', probe: () => send(`TRACE /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`), status: 405, code: 'method_not_allowed' },
  { name: 'methods: TRACK (unknown to the parser) → 400, never forwarded', probe: () => send(`TRACK /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`), status: 400, code: 'invalid_request' },
  { name: 'methods: CONNECT (authority form) → 405 problem, never forwarded', probe: () => send(`CONNECT 127.0.0.1:${echoPort()} HTTP/1.1\r\nHost: 127.0.0.1:${echoPort()}\r\nAuthorization: ${ALICE}\r\n\r\n`), status: 405, code: 'method_not_allowed' },

  // ------------------------------------------------------------------------------ Host
  { name: 'host: two Host headers → 400', probe: () => send(`GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`), status: 400, code: 'invalid_request' },
  { name: 'host: two Host headers in other case → 400', probe: () => send(`GET /v1/x HTTP/1.1\r\nhost: 127.0.0.1\r\nHOST: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`), status: 400, code: 'invalid_request' },
  { name: 'host: HTTP/1.1 without Host → 400 problem', probe: () => send(`GET /v1/x HTTP/1.1\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`), status: 400, code: 'invalid_request' },
  ...['evil.example, 127.0.0.1', 'a b', 'user@127.0.0.1', '127.0.0.1/v1', 'evil.example:80:80', '[::1', 'x..y', '-evil'].map((host): Row => ({
    name: `host: Host "${host}" is not host[:port] → 400, never copied into X-Forwarded-Host`,
    probe: () => send(`GET /v1/x HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`),
    status: 400,
    code: 'invalid_request',
  })),
  {
    name: 'control: host: an HTTP/1.0 request without Host passes, and X-Forwarded-Host is left out',
    probe: () => send(`GET /v1/no-host HTTP/1.0\r\nAuthorization: ${ALICE}\r\n\r\n`),
    status: 200,
    upstream: (r) => expect(r.headers['x-forwarded-host']).toBeUndefined(),
  },
  {
    name: 'control: host: [::1]:8080 is a valid Host and is forwarded as X-Forwarded-Host',
    probe: () => send(`GET /v1/ipv6-host HTTP/1.1\r\nHost: [::1]:8080\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`),
    status: 200,
    upstream: (r) => expect(r.headers['x-forwarded-host']).toBe('[::1]:8080'),
  },

  // --------------------------------------------------------------------- override headers
  {
    name: 'headers: request-target and method override headers are removed before forwarding',
    probe: () => send(get('/v1/overrides', `Authorization: ${ALICE}\r\n${OVERRIDE_HEADERS.map((h) => `${h}: /admin\r\n`).join('')}`)),
    status: 200,
    upstream: (r) => {
      const names = r.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
      expect(names.filter((n) => OVERRIDE_HEADERS.includes(n))).toEqual([]);
      expect(JSON.stringify(r.rawHeaders)).not.toContain('/admin');
    },
  },
  {
    name: 'headers: override headers spelled with underscores are removed too',
    probe: () => send(get('/v1/overrides', `Authorization: ${ALICE}\r\nX_Original_URL: /admin\r\nX_HTTP_Method_Override: DELETE\r\n`)),
    status: 200,
    upstream: (r) => expect(JSON.stringify(r.rawHeaders)).not.toMatch(/\/admin|DELETE/),
  },
  {
    name: 'headers: a route that allows X-HTTP-Method-Override passes that one header only',
    probe: () => send(get('/v1/override/x', `Authorization: ${ALICE}\r\nX-HTTP-Method-Override: PATCH\r\nX-Original-URL: /admin\r\n`)),
    status: 200,
    upstream: (r) => {
      expect(r.headers['x-http-method-override']).toBe('PATCH');
      expect(r.headers['x-original-url']).toBeUndefined();
    },
  },

  // ------------------------------------------------------------------------ Expect
  {
    name: 'expect: 100-continue without credentials → the final 401 at once, no 100, the body never invited',
    probe: async () => {
      const c = await open();
      c.socket.write('POST /v1/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n');
      expect(await c.waitFor(/\r\n\r\n/, 1000)).toBe(true);
      expect(c.text()).not.toMatch(/^HTTP\/1\.1 100/);
      expect(c.text()).toMatch(/connection: close/i);
      await c.closed();
      return c.text();
    },
    status: 401,
    code: 'missing_credentials',
  },
  {
    name: 'expect: 100-continue with a wrong password → 401, no 100',
    probe: async () => {
      const c = await open();
      c.socket.write(`POST /v1/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${basic('alice', 'wrong')}\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n`);
      expect(await c.waitFor(/\r\n\r\n/, 2000)).toBe(true);
      await c.closed();
      return c.text();
    },
    status: 401,
    code: 'invalid_credentials',
  },
  {
    name: 'expect: 100-continue with valid credentials → 100 Continue, then the body reaches the upstream',
    probe: async () => {
      const c = await open();
      c.socket.write(`POST /v1/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`);
      expect(await c.waitFor(/^HTTP\/1\.1 100 Continue\r\n\r\n/, 1000)).toBe(true);
      c.socket.write('hello');
      await c.closed();
      return c.text().replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
    },
    status: 200,
    upstream: (r) => {
      expect(r.body).toBe('hello');
      expect(r.headers.expect).toBeUndefined();
    },
  },
  {
    name: 'expect: 100-continue on token create with the wrong content type → 415, no 100',
    probe: async () => {
      const c = await open();
      c.socket.write('POST /v1/tokens/create HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n');
      expect(await c.waitFor(/\r\n\r\n/, 1000)).toBe(true);
      expect(c.text()).not.toMatch(/^HTTP\/1\.1 100/);
      await c.closed();
      return c.text();
    },
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'expect: an expectation other than 100-continue → 417 problem',
    probe: () => send(`GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nExpect: something-else\r\nConnection: close\r\n\r\n`),
    status: 417,
    code: 'expectation_failed',
  },

  // ------------------------------------------------------------------------ slow requests
  {
    name: 'slow: a token body trickling one byte every 300 ms gets 408 after server.bodyTimeoutMs (1 s) and the connection closes',
    probe: async () => {
      const c = await open();
      c.socket.write('POST /v1/tokens/create HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n');
      const started = Date.now();
      const trickle = setInterval(() => c.socket.writable && c.socket.write('{'), 300);
      await c.closed();
      clearInterval(trickle);
      expect(Date.now() - started).toBeLessThan(2500);
      return c.text();
    },
    status: 408,
    code: 'request_timeout',
  },
  {
    name: 'slow: headers trickling in are cut after server.headersTimeoutMs (1 s) with a 408 problem',
    probe: async () => {
      const c = await open();
      const started = Date.now();
      c.socket.write('GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      const trickle = setInterval(() => c.socket.writable && c.socket.write('X-Slow: a\r\n'), 200);
      await c.closed();
      clearInterval(trickle);
      expect(Date.now() - started).toBeLessThan(3500);
      return c.text();
    },
    status: 408,
    code: 'request_timeout',
  },
  {
    name: 'slow: an unauthenticated POST with a body still to come gets 401 at once and its connection is closed',
    probe: async () => {
      const c = await open();
      c.socket.write('POST /v1/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\npartial');
      const started = Date.now();
      await c.closed();
      expect(Date.now() - started).toBeLessThan(1000);
      return c.text();
    },
    status: 401,
    code: 'missing_credentials',
  },
  {
    name: 'slow: a proxied body that stalls for the idle limit (600 ms) → 408, the upstream request torn down',
    probe: async () => {
      const c = await open();
      c.socket.write(`POST /v1/stalled-upload HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nContent-Length: 100\r\nConnection: close\r\n\r\nfirst bytes`);
      const started = Date.now();
      await c.closed();
      expect(Date.now() - started).toBeLessThan(2000);
      return c.text();
    },
    status: 408,
    code: 'request_timeout',
  },
  {
    name: 'control: slow: a slow but steady proxied upload (20 chunks, 200 ms apart: 4 s, far past the idle limit) passes whole',
    probe: async () => {
      const c = await open();
      c.socket.write(`POST /v1/steady-upload HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`);
      for (let i = 0; i < 20; i++) {
        await new Promise((r) => setTimeout(r, 200));
        c.socket.write(`5\r\nchunk\r\n`);
      }
      c.socket.write('0\r\n\r\n');
      await c.closed();
      return c.text();
    },
    status: 200,
    upstream: (r) => expect(r.body).toBe('chunk'.repeat(20)),
  },

  // --------------------------------------------------------------------------- logging
  {
    name: 'logs: an absolute-form target with userinfo and a token in its query → 400, and neither is logged',
    probe: () => send(`GET http://${USERINFO}@127.0.0.1/v1/x?${SECRET_QUERY} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nConnection: close\r\n\r\n`),
    status: 400,
    code: 'invalid_path',
  },
  {
    name: 'logs: a query string carrying a token is forwarded, and never logged',
    probe: () => send(get(`/v1/with-query?${SECRET_QUERY}`)),
    status: 200,
    upstream: (r) => expect(r.url).toBe(`/v1/with-query?${SECRET_QUERY}`),
  },
];

function echoPort(): number {
  return Number(new URL(gw.echo.url).port);
}

describe('request forms and header trust (one row per finding)', () => {
  it.each(ROWS)('$name', async (row) => {
    const before = gw.echo.received.length;
    const answer = await row.probe();
    await settle();
    expect(statusOf(answer), answer.slice(0, 600)).toBe(row.status);
    const arrived = gw.echo.received.slice(before);
    if (row.upstream) {
      expect(arrived).toHaveLength(1);
      row.upstream(arrived[0]!);
    } else {
      if (row.status >= 400) {
        const problem = problemOf(answer);
        expect(problem.status).toBe(row.status);
        if (row.code) expect(problem.code).toBe(row.code);
      }
      // A refused request never reaches the upstream; a stalled upload reached it only in part and was torn down.
      expect(arrived.filter((r) => !r.url.includes('stalled-upload')).map((r) => r.url), 'a refused request reached the upstream').toEqual([]);
    }
  });

  it('the stalled upload never completed at the upstream', () => {
    expect(gw.echo.received.filter((r) => r.url.includes('stalled-upload'))).toEqual([]);
  });

  it('no log line of this table carries a password, a Basic credential, userinfo or a secret from a query string', () => {
    const all = logLines.join('\n');
    expect(logLines.length, 'the access log and debug lines of the table were captured').toBeGreaterThan(ROWS.length / 2);
    for (const secret of ['alice-pw', ALICE.slice(6), 'leaky-pass', 'qs-secret-4711', USERINFO]) {
      expect(all, `a log line carries ${secret}`).not.toContain(secret);
    }
  });

  it('the gateway still answers /healthz', async () => {
    expect(statusOf(await send('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'))).toBe(200);
  });
});
