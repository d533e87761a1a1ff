import { describe, expect, it } from 'vitest';
import { basic, createTokens, gatewayFixture, postJson } from '../support/fixtures.js';
import { captureLog, writeGroups } from '../support/authz.js';
import { eventually } from '../support/poll.js';
import { openRaw } from '../support/raw-client.js';

/**
 * The forward-auth endpoint answered by the gateway itself (the e2e suite puts nginx and Caddy in
 * front): the same steps as a proxied request decide, about the request the headers describe.
 */

const alice = basic('alice', 'alice-pw');
const carol = basic('carol', 'carol-pw');
const log = captureLog();

const gw = gatewayFixture({
  users: { alice: 'alice-pw', carol: 'carol-pw' },
  before: (f) => {
    writeGroups(f.users.dir, { admins: ['alice'], staff: ['alice', 'carol'] });
  },
  config: (f) => ({
    users: { htpasswd: f.users.file, groups: `${f.users.dir}/users.groups`, watch: false },
    forwardAuth: { path: '/auth/verify' },
    log: { level: 'info', access: true },
    upstreams: { echo: { url: f.echo.url } },
    routes: [
      { path: '/v1/reports', upstream: 'echo', allow: { groups: ['admins'], methods: ['GET'] }, paging: { sortable: ['a'] } },
      // No upstream: the proxy in front serves it; the gateway only answers about it.
      { path: '/wiki', allow: { groups: ['staff'] } },
      { path: '/limited', rateLimit: { requests: 1, windowSeconds: 60 } },
      // An admin-only route under a catch-all one: the spellings below must not reach around it.
      { path: '/api', allow: { groups: ['staff'] } },
      { path: '/api/admin', allow: { groups: ['admins'] } },
      { path: '/api/items', paging: { sizes: [10, 20], defaultSize: 10 } },
    ],
  }),
  deps: () => ({ log }),
});

function ask(method: string, uri: string, headers: Record<string, string> = {}, style: 'forwarded' | 'original' = 'forwarded', callMethod = 'GET') {
  const described: Record<string, string> = style === 'forwarded' ? { 'x-forwarded-method': method, 'x-forwarded-uri': uri } : { 'x-original-method': method, 'x-original-uri': uri };
  return fetch(`${gw.base}/auth/verify`, { method: callMethod, headers: { ...described, ...headers } });
}

describe('forward-auth', () => {
  it('allowed: 200, empty body, the identity in headers, never cached; the upstream is not called', async () => {
    const before = gw.echo.received.length;
    const res = await ask('GET', '/v1/reports/7?size=10', { authorization: alice, 'x-forwarded-host': 'api.example.com', 'x-forwarded-proto': 'https' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    expect(res.headers.get('x-authenticated-user')).toBe('alice');
    expect(res.headers.get('x-authenticated-via')).toBe('basic');
    expect(res.headers.get('x-authenticated-groups')).toBe('admins,staff');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(gw.echo.received.length).toBe(before);
  });

  it('nginx\'s X-Original-Method / X-Original-URI, and any method of the call itself (HEAD, POST)', async () => {
    expect((await ask('GET', '/wiki/page', { authorization: carol }, 'original')).status).toBe(200);
    expect((await ask('GET', '/wiki/page', { authorization: carol }, 'original', 'HEAD')).status).toBe(200);
    expect((await ask('GET', '/wiki/page', { authorization: carol }, 'forwarded', 'POST')).status).toBe(200);
  });

  it('no credentials: 401 with the challenges; wrong ones: 401', async () => {
    const res = await ask('GET', '/v1/reports');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('Basic realm="auth-gateway"');
    expect(await res.json()).toMatchObject({ code: 'missing_credentials' });
    expect((await ask('GET', '/v1/reports', { authorization: basic('alice', 'nope') })).status).toBe(401);
  });

  it('a question about a gRPC call is refused with its HTTP status, never a gRPC answer (an HTTP 200 a proxy lets through)', async () => {
    const grpc = { 'content-type': 'application/grpc', te: 'trailers' };
    for (const [headers, status] of [[{}, 401], [{ authorization: carol }, 403], [{ authorization: alice, 'x-forwarded-uri': '/nowhere.Svc/Call' }, 404]] as const) {
      const res = await ask('POST', '/v1/reports/pkg.Svc/Call', { ...grpc, ...headers });
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(res.headers.get('grpc-status')).toBeNull();
    }
    // Nor for a caller the trusted proxies leave out, nor for a relayed refusal's replay.
    const replay = await fetch(`${gw.base}/auth/verify`, { headers: { ...grpc, 'x-gateway-refusal': 'forged' } });
    expect(replay.status).toBe(400);
  });

  it('the allow rules judge the described method and path: 403 forbidden', async () => {
    const wrongUser = await ask('GET', '/v1/reports', { authorization: carol });
    expect(wrongUser.status).toBe(403);
    expect(await wrongUser.json()).toMatchObject({ code: 'forbidden' });
    // The call itself is a GET; the described DELETE is what is judged.
    expect((await ask('DELETE', '/v1/reports', { authorization: alice })).status).toBe(403);
  });

  // nginx and Caddy forward the URI as the client wrote it, and the upstream resolves it its own way:
  // the gateway judges only a URI already in normal form (a resolved spelling is another path).
  it.each([
    ['a # before dot segments', '/api/admin/report#/../../items'],
    ['dot-dot segments out of the admin route', '/api/admin/users/../../items'],
    ['encoded dot-dot segments', '/api/admin/users/%2e%2e/%2e%2e/items'],
    ['dot-dot segments into the admin route', '/api/items/../admin/report'],
    ['encoded dot-dot segments into another route', '/wiki/%2e%2e/v1/reports'],
    ['a dot segment', '/api/./admin'],
    ['repeated slashes', '/api//admin/report'],
    ['an escaped unreserved letter', '/api/%61dmin/report'],
    ['an escape in lower case', '/api/items/j%c3%a4ger'],
    ['a # in the query', '/api/items?x=1#/../../admin'],
    ['a path parameter a servlet container drops (its reading is the admin route)', '/api/admin;jsessionid=1/report'],
    ['an empty segment with a path parameter', '/api/;x/admin/report'],
    ['a trailing dot IIS drops (its reading is the admin route)', '/api/admin./report'],
    ['a trailing space IIS drops', '/api/admin%20/report'],
    ['trailing dots and spaces together', '/api/admin.%20./report'],
    ['a dot segment with a trailing space', '/api/x/..%20/admin/report'],
  ])('a described URI not in normal form is refused, not resolved: %s (400 invalid_path)', async (_name, uri) => {
    for (const style of ['forwarded', 'original'] as const) {
      const res = await ask('GET', uri, { authorization: carol }, style);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: 'invalid_path' });
    }
  });

  it('routes match without regard to case: /api/ADMIN is the admin route, not the catch-all /api', async () => {
    for (const path of ['/api/ADMIN/report', '/api/Admin', '/API/admin/report', '/api/ADMIN/']) {
      const res = await ask('GET', path, { authorization: carol });
      expect(res.status, path).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'forbidden' });
      expect((await ask('GET', path, { authorization: alice })).status, path).toBe(200);
    }
    expect((await ask('GET', '/api/items/7', { authorization: carol })).status).toBe(200);
    expect((await ask('GET', '/API/other', { authorization: carol })).status).toBe(200);
  });

  it('a scheme other than http or https is refused (400 invalid_request)', async () => {
    for (const proto of ['gopher', 'ws', 'file']) {
      const res = await ask('GET', '/api/items', { authorization: carol, 'x-forwarded-proto': proto });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: 'invalid_request' });
    }
    expect((await ask('GET', '/api/items', { authorization: carol, 'x-forwarded-proto': 'https' })).status).toBe(200);
  });

  it('a described cross-site POST or DELETE with Basic (the proxy passes Origin / Sec-Fetch-Site on) is refused: 403 cors_not_allowed', async () => {
    const site = { 'x-forwarded-host': 'wiki.example.com', 'x-forwarded-proto': 'https' };
    for (const method of ['POST', 'DELETE']) {
      for (const from of [{ origin: 'https://evil.example' }, { origin: 'http://wiki.example.com' }, { 'sec-fetch-site': 'cross-site' }] as Record<string, string>[]) {
        const res = await ask(method, '/wiki/page', { authorization: carol, ...site, ...from });
        expect(res.status, `${method} ${JSON.stringify(from)}`).toBe(403);
        expect(await res.json()).toMatchObject({ code: 'cors_not_allowed' });
      }
      // The described request's own origin, or no browser at all.
      expect((await ask(method, '/wiki/page', { authorization: carol, ...site, origin: 'https://wiki.example.com' })).status).toBe(200);
      expect((await ask(method, '/wiki/page', { authorization: carol, ...site })).status).toBe(200);
    }
    // A safe described method is not judged by its origin, whatever the call's own method.
    expect((await ask('GET', '/wiki/page', { authorization: carol, origin: 'https://evil.example' }, 'forwarded', 'POST')).status).toBe(200);
  });

  it('a path no route serves: 404; a malformed or ambiguous description: 400', async () => {
    expect((await ask('GET', '/nowhere', { authorization: alice })).status).toBe(404);
    expect((await fetch(`${gw.base}/auth/verify`, { headers: { authorization: alice } })).status).toBe(400);
    // A client behind nginx adds X-Forwarded-Uri to have /wiki judged while nginx serves /v1/reports.
    const spoofed = await fetch(`${gw.base}/auth/verify`, { headers: { authorization: carol, 'x-original-method': 'GET', 'x-original-uri': '/v1/reports', 'x-forwarded-uri': '/wiki' } });
    expect(spoofed.status).toBe(400);
    expect((await ask('GET', '/a/%2f/b', { authorization: alice })).status).toBe(400);
  });

  it('paging values are not enforced (the gateway cannot rewrite what another proxy forwards)', async () => {
    expect((await ask('GET', '/v1/reports?size=7&sort=nope', { authorization: alice })).status).toBe(200);
  });

  it('other spellings of the paging names are refused on a paged route (400), in any case of the path', async () => {
    for (const query of ['size=10&size[]=100000', 'size[0]=100000', 'size%5B%5D=100000', 'SIZE=100000', 'size.x=1', 'Page=2', 'sort[]=a', 'size%00=1', 'size%20=100000']) {
      for (const path of ['/api/items', '/api/ITEMS']) {
        const res = await ask('GET', `${path}?${query}`, { authorization: carol });
        expect(res.status, `${path}?${query}`).toBe(400);
        expect((await res.json() as { code: string }).code).toMatch(/^invalid_(page_size|page|sort)$/);
      }
    }
    expect((await ask('GET', '/api/items?size=10&page=2&sizes=3', { authorization: carol })).status).toBe(200);
    // Not a paged route: names are the upstream's business.
    expect((await ask('GET', '/api/other?size[]=100000', { authorization: carol })).status).toBe(200);
  });

  it('the rate limit counts forward-auth answers: 429 with Retry-After', async () => {
    expect((await ask('GET', '/limited', { authorization: carol })).status).toBe(200);
    const limited = await ask('GET', '/limited/x', { authorization: carol });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await limited.json()).toMatchObject({ code: 'rate_limited' });
  });

  it('bearer tokens: allowed with via bearer, and a revoked token is 401 at once', async () => {
    const { accessToken } = await createTokens(gw.base, 'alice', 'alice-pw');
    const ok = await ask('GET', '/v1/reports', { authorization: `Bearer ${accessToken}` });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-authenticated-via')).toBe('bearer');
    expect((await postJson(gw.base, '/v1/tokens/revoke', { token: accessToken, type: 'ACCESS_TOKEN' })).status).toBe(200);
    const revoked = await ask('GET', '/v1/reports', { authorization: `Bearer ${accessToken}` });
    expect(revoked.status).toBe(401);
    expect(revoked.headers.get('www-authenticate')).toMatch(/^Bearer /);
  });

  it('a route without upstream answers forward-auth only: sent to the gateway itself it is 404', async () => {
    const direct = await fetch(`${gw.base}/wiki/page`, { headers: { authorization: carol } });
    expect(direct.status).toBe(404);
    expect(await direct.json()).toMatchObject({ code: 'not_found' });
  });

  it('the access line says forward-auth and names the described request; the metrics count answers by status', async () => {
    log.lines.length = 0;
    await ask('DELETE', '/v1/reports/9', { authorization: alice, 'x-forwarded-host': 'api.example.com' });
    expect(await eventually(() => log.lines.some((l) => l.msg === 'request' && l.forwardAuth === true))).toBe(true);
    expect(log.lines.find((l) => l.msg === 'request')).toMatchObject({ method: 'DELETE', path: '/v1/reports/9', status: 403, code: 'forbidden', forwardAuth: true, forwardedHost: 'api.example.com', user: 'alice', route: '/v1/reports' });
    const metrics = await gw.gateway.metrics.registry.metrics();
    expect(metrics).toMatch(/auth_gateway_forward_auth_answers_total\{status="200"\} [1-9]/);
    expect(metrics).toMatch(/auth_gateway_forward_auth_answers_total\{status="403"\} [1-9]/);
    expect(metrics).toMatch(/auth_gateway_forbidden_total\{route="\/v1\/reports"\} [1-9]/);
  });

  it('a refused description is logged as described: the access line names the raw path, not a resolved one', async () => {
    log.lines.length = 0;
    await ask('GET', '/api/admin/users/../../items?size=10', { authorization: carol });
    expect(await eventually(() => log.lines.some((l) => l.msg === 'request' && l.forwardAuth === true))).toBe(true);
    expect(log.lines.find((l) => l.msg === 'request')).toMatchObject({ method: 'GET', path: '/api/admin/users/../../items', status: 400, code: 'invalid_path', forwardAuth: true });
    log.lines.length = 0;
    await ask('GET', '/api/ADMIN/report', { authorization: carol });
    expect(await eventually(() => log.lines.some((l) => l.msg === 'request' && l.forwardAuth === true))).toBe(true);
    expect(log.lines.find((l) => l.msg === 'request')).toMatchObject({ path: '/api/ADMIN/report', status: 403, route: '/api/admin', forwardAuth: true });
  });

  it('a call about a WebSocket handshake (Upgrade headers copied along, as Caddy does) gets the same plain answer', async () => {
    const c = await openRaw(gw.port);
    try {
      c.socket.write([
        'GET /auth/verify HTTP/1.1', `Host: 127.0.0.1:${gw.port}`, `Authorization: ${carol}`,
        'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
        'X-Forwarded-Method: GET', 'X-Forwarded-Uri: /wiki/live', '', '',
      ].join('\r\n'));
      expect(await c.waitFor(/\r\n\r\n/, 3000)).toBe(true);
      expect(c.text()).toMatch(/^HTTP\/1\.1 200 /);
      expect(c.text()).toMatch(/\r\nX-Authenticated-User: carol\r\n/i);
      expect(c.text()).not.toMatch(/\r\nUpgrade:/i);
    } finally {
      c.socket.destroy();
    }
  });

  it('/openapi.json documents the endpoint', async () => {
    const doc = await (await fetch(`${gw.base}/openapi.json`)).json() as { paths: Record<string, { get: { responses: Record<string, unknown> } }> };
    expect(Object.keys(doc.paths['/auth/verify']!.get.responses)).toEqual(expect.arrayContaining(['200', '401', '403', '429']));
  });
});

describe('forward-auth with trustedProxies', () => {
  const from = (trustedProxies: string[], extra: Record<string, unknown> = {}) => gatewayFixture({
    users: { carol: 'carol-pw' },
    config: () => ({ forwardAuth: { path: '/auth/verify', trustedProxies }, routes: [{ path: '/wiki' }], ...extra }),
  });
  const elsewhere = from(['10.0.0.0/8', 'fd00::/8']);
  // trustProxy on: X-Forwarded-For names an address in the list, but the caller is the TCP peer.
  const spoofable = from(['10.0.0.0/8', '192.0.2.1'], { server: { host: '127.0.0.1', port: 0, trustProxy: 2 } });
  const loopback = from(['127.0.0.0/8', '::1']);
  const call = (base: string, headers: Record<string, string> = {}) =>
    fetch(`${base}/auth/verify`, { headers: { 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/wiki/page', authorization: carol, ...headers } });

  it('a caller outside the list gets 403 before anything else is judged, whatever X-Forwarded-For says', async () => {
    for (const [gwx, headers] of [
      [elsewhere, {}],
      [elsewhere, { authorization: 'Basic bm9ib2R5Om5vcGU=' }],
      [elsewhere, { 'x-forwarded-uri': 'no path' }],
      [spoofable, { 'x-forwarded-for': '10.1.2.3' }],
      [spoofable, { 'x-forwarded-for': '192.0.2.1, 10.1.2.3' }],
      [spoofable, { forwarded: 'for=10.1.2.3', 'x-real-ip': '10.1.2.3' }],
    ] as const) {
      const res = await call(gwx.base, headers);
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await res.json()).toMatchObject({ status: 403, code: 'forbidden', detail: expect.stringContaining('forwardAuth.trustedProxies') });
      expect(res.headers.get('x-authenticated-user')).toBeNull();
    }
  });

  it('a listed caller is answered as usual; other paths are not gated', async () => {
    const res = await call(loopback.base);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-authenticated-user')).toBe('carol');
    expect((await call(loopback.base, { authorization: 'Basic bm9ib2R5Om5vcGU=' })).status).toBe(401);
    expect((await fetch(`${elsewhere.base}/healthz`)).status).toBe(200);
  });
});
