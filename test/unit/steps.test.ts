import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Groups } from '../../src/authz/groups.js';
import { newExchange } from '../../src/core/exchange.js';
import type { Principal } from '../../src/core/principal.js';
import type { GatewayExchange } from '../../src/http/state.js';
import { allowRules } from '../../src/pipeline/steps/allow.js';
import { paging } from '../../src/pipeline/steps/paging.js';
import { route } from '../../src/pipeline/steps/route.js';
import { upstreamHeaders } from '../../src/pipeline/steps/upstream-headers.js';
import { runSteps, type Step } from '../../src/pipeline/step.js';
import { RouteTable } from '../../src/routes/route-table.js';
import { testConfig } from '../support/fixtures.js';
import { refusalOf } from '../support/refusal.js';

/**
 * The pipeline's runner and steps on an exchange record, without a port: a request and a response on an
 * unconnected socket, the steps called as the pipeline calls them.
 */
function exchange(target: string, headers: Record<string, string> = {}, method = 'GET'): GatewayExchange {
  const req = new IncomingMessage(new Socket());
  req.method = method;
  req.url = target;
  req.headers = { host: 'gw.example', ...headers };
  req.rawHeaders = Object.entries(req.headers).flatMap(([n, v]) => [n, String(v)]);
  return newExchange(req, new ServerResponse(req), 0);
}

const alice: Principal = { user: 'alice', via: 'basic', groups: undefined, ownGroups: false, sid: undefined, expiresAt: undefined, ambient: true, proof: 'v', credential: undefined };
const groups: Groups = { of: (user) => (user === 'alice' ? ['staff'] : []), onChange: () => () => {} };
const config = testConfig('/dev/null', {
  users: { htpasswd: '/dev/null', groups: '/dev/null', watch: false },
  upstreams: { list: { url: 'http://127.0.0.1:9' } },
  routes: [
    { path: '/v1/conversations', upstream: 'list', paging: { sortable: ['createdAt'] } },
    { path: '/v1/admin', upstream: 'list', allow: { groups: ['admins'] } },
    { path: '/v1/staff', upstream: 'list', stripPrefix: true, allow: { groups: ['staff'], methods: ['GET'] } },
  ],
});
const routes = new RouteTable(config.routes, config.upstreams);

describe('runSteps', () => {
  it('runs every step synchronously while none waits, and makes no promise', () => {
    const seen: string[] = [];
    const steps: Step[] = ['a', 'b', 'c'].map((n) => () => void seen.push(n));
    expect(runSteps(steps, exchange('/'))).toBeUndefined();
    expect(seen).toEqual(['a', 'b', 'c']);
  });

  it('waits for a step that returns a promise before the next, and hands the last step\'s promise on as it is', async () => {
    const seen: string[] = [];
    let release!: () => void;
    const last = Promise.resolve();
    const steps: Step[] = [
      () => void seen.push('sync'),
      () => new Promise<void>((r) => (release = () => (seen.push('waited'), r()))),
      () => void seen.push('after'),
      () => last,
    ];
    const pending = runSteps(steps, exchange('/'));
    expect(pending).toBeInstanceOf(Promise);
    expect(seen).toEqual(['sync']);
    release();
    await pending;
    expect(seen).toEqual(['sync', 'waited', 'after']);
    expect(runSteps([() => last], exchange('/'))).toBe(last);
  });

  it('stops at a step that throws: the refusal reaches the caller, later steps do not run', () => {
    let ran = false;
    expect(() => runSteps([() => { throw new Error('refused'); }, () => void (ran = true)], exchange('/'))).toThrow('refused');
    expect(ran).toBe(false);
  });
});

describe('the route and allow steps', () => {
  it('match the path in any case, and judge the principal by the matched route\'s rule', () => {
    const ex = exchange('/v1/ADMIN/report');
    ex.principal = { ...alice };
    route(routes)(ex);
    expect(ex.route?.path).toBe('/v1/admin');
    expect(() => allowRules(groups)(ex)).toThrow(expect.objectContaining({ status: 403, code: 'forbidden' }));
    // The groups are read once, onto the principal, for every later step.
    expect(ex.principal.groups).toEqual(['staff']);
  });

  it('a path parameter (;) is judged only when both readings of the path have the same route', () => {
    // Servlet containers read /v1/admin;x/report as /v1/admin/report; the route step may not judge it as /v1/conversations' sibling.
    for (const path of ['/v1/admin;x/report', '/v1/;x/admin', '/v1/ADMIN;x']) {
      expect(() => route(routes)(exchange(path))).toThrow(expect.objectContaining({ status: 400, code: 'invalid_path' }));
    }
    const same = exchange('/v1/admin/report;x=1');
    route(routes)(same);
    expect(same.route?.path).toBe('/v1/admin');
    // No route either way: 404 as for any unrouted path.
    expect(() => route(routes)(exchange('/v1/nothing;x'))).toThrow(expect.objectContaining({ status: 404 }));
  });

  it('a trailing dot or space on a segment is judged only when the path without them has the same route', () => {
    // IIS and ASP.NET read /v1/admin./report as /v1/admin/report.
    for (const path of ['/v1/admin./report', '/v1/admin%20', '/v1/%20/admin', '/v1/ADMIN.%20.', '/v1/admin%20;x']) {
      expect(() => route(routes)(exchange(path))).toThrow(expect.objectContaining({ status: 400, code: 'invalid_path' }));
    }
    const same = exchange('/v1/admin/report.');
    route(routes)(same);
    expect(same.route?.path).toBe('/v1/admin');
    expect(() => route(routes)(exchange('/v1/nothing.'))).toThrow(expect.objectContaining({ status: 404 }));
  });

  it('404 for a path no route serves, naming it', () => {
    expect(() => route(routes)(exchange('/v1/nothing'))).toThrow(expect.objectContaining({ status: 404, code: 'not_found' }));
  });

  it('a method the rule does not list is refused, one it lists passes', () => {
    const get = exchange('/v1/staff/x');
    get.principal = { ...alice };
    route(routes)(get);
    expect(allowRules(groups)(get)).toBeUndefined();
    const post = exchange('/v1/staff/x', {}, 'POST');
    post.principal = { ...alice };
    route(routes)(post);
    expect(() => allowRules(groups)(post)).toThrow(expect.objectContaining({ status: 403 }));
  });
});

describe('the paging step', () => {
  it('writes the canonical target for the upstream, the same on a second request with the same query', () => {
    for (let i = 0; i < 2; i++) {
      const ex = exchange('/v1/conversations?q=x&sort=createdAt,DESC&size=10');
      route(routes)(ex);
      paging(ex);
      expect(ex.req.url).toBe('/v1/conversations?q=x&size=10&page=0&sort=createdAt%2Cdesc');
    }
  });

  it('refuses a size outside the allowed ones and a name variant, on every request (refusals are not cached)', () => {
    for (const target of ['/v1/conversations?size=7', '/v1/conversations?size=7', '/v1/conversations?SIZE=10', '/v1/conversations?size%5B%5D=10']) {
      const ex = exchange(target);
      route(routes)(ex);
      expect(refusalOf(() => paging(ex)), target).toMatchObject({ status: 400 });
    }
  });

  it('strips the route prefix for a stripPrefix route', () => {
    const ex = exchange('/v1/staff/items?a=1');
    route(routes)(ex);
    paging(ex);
    expect(ex.req.url).toBe('/items?a=1');
  });
});

describe('the upstream headers step', () => {
  it('builds the upstream\'s headers anew: client identity and hop-by-hop headers out, the gateway\'s own in, the request\'s own object untouched', () => {
    const ex = exchange('/v1/staff/x', {
      authorization: 'Basic xyz', 'x-authenticated-user': 'mallory', x_authenticated_user: 'mallory', 'x-amzn-oidc-identity': 'mallory',
      connection: 'keep-alive, x-secret', 'x-secret': 's', accept: 'application/json', 'x-request-id': 'rid-1',
    });
    ex.principal = { ...alice };
    route(routes)(ex);
    allowRules(groups)(ex);
    const before = ex.req.headers;
    upstreamHeaders(false)(ex);
    const h = ex.upstreamHeaders!;
    expect(ex.req.headers).toBe(before);
    expect(h).not.toBe(before);
    expect(before['x-authenticated-user']).toBe('mallory');
    expect(h).toMatchObject({
      accept: 'application/json', 'x-authenticated-user': 'alice', 'x-authenticated-via': 'basic', 'x-authenticated-groups': 'staff',
      'x-request-id': 'rid-1', 'x-forwarded-proto': 'http', 'x-forwarded-host': 'gw.example',
    });
    for (const gone of ['authorization', 'x_authenticated_user', 'x-amzn-oidc-identity', 'connection', 'x-secret']) expect(h[gone], gone).toBeUndefined();
  });
});
