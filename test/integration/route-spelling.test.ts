import { describe, expect, it } from 'vitest';
import { basic, gatewayFixture } from '../support/fixtures.js';
import { writeGroups } from '../support/authz.js';
import { exchange, handshake, parseAnswer, request } from '../support/raw-client.js';

/**
 * Spellings of a path or a query that upstreams (Express, ASP.NET, IIS) read as another route's or as a
 * paging parameter: an admin-only /api/admin and a paged /api/items under a catch-all /api.
 */

const alice = basic('alice', 'alice-pw');
const carol = basic('carol', 'carol-pw');

const gw = gatewayFixture({
  users: { alice: 'alice-pw', carol: 'carol-pw' },
  before: (f) => {
    writeGroups(f.users.dir, { admins: ['alice'] });
  },
  config: (f) => ({
    users: { htpasswd: f.users.file, groups: `${f.users.dir}/users.groups`, watch: false },
    upstreams: { echo: { url: f.echo.url } },
    routes: [
      { path: '/api', upstream: 'echo' },
      { path: '/api/admin', upstream: 'echo', allow: { groups: ['admins'] } },
      { path: '/api/items', upstream: 'echo', paging: { sizes: [10, 20], defaultSize: 10 } },
      { path: '/api/strip', upstream: 'echo', stripPrefix: true },
    ],
  }),
});

async function get(path: string, authorization = carol): Promise<{ status: number; code?: string; url?: string }> {
  const before = gw.echo.received.length;
  const res = await request(gw.port, path, { headers: { Authorization: authorization } });
  const forwarded = gw.echo.received.length > before ? gw.echo.received.at(-1)!.url : undefined;
  const code = res.status >= 400 ? (JSON.parse(res.body.toString('utf8')) as { code: string }).code : undefined;
  return { status: res.status, code, url: forwarded };
}

describe('routes match without regard to case', () => {
  it.each(['/api/ADMIN/report', '/api/Admin', '/API/ADMIN', '/Api/admin/report/'])('%s is the admin route for carol: 403, the upstream sees nothing', async (path) => {
    expect(await get(path)).toEqual({ status: 403, code: 'forbidden', url: undefined });
  });

  it('an admin gets there, and the upstream receives the path as the client spelt it', async () => {
    expect(await get('/api/ADMIN/report', alice)).toEqual({ status: 200, url: '/api/ADMIN/report' });
  });

  it('/api/ITEMS has /api/items\'s paging: size=100000 is refused, an allowed size is made canonical', async () => {
    expect(await get('/api/ITEMS?size=100000')).toMatchObject({ status: 400, code: 'invalid_page_size', url: undefined });
    expect(await get('/api/ITEMS?size=20')).toEqual({ status: 200, url: '/api/ITEMS?size=20&page=0' });
  });

  it('a stripped prefix is cut by the route\'s length, whatever its case', async () => {
    expect(await get('/API/STRIP/Rest/x')).toEqual({ status: 200, url: '/Rest/x' });
    expect(await get('/api/Strip')).toEqual({ status: 200, url: '/' });
  });

  it('a proxied path is still normalized, and the normalized path is judged and forwarded', async () => {
    expect(await get('/api/items/../admin/report')).toMatchObject({ status: 403, code: 'forbidden' });
    expect(await get('/api/x/%2e%2e/admin/report', alice)).toEqual({ status: 200, url: '/api/admin/report' });
    expect(await get('/api//other/./y')).toEqual({ status: 200, url: '/api/other/y' });
  });
});

describe('path parameters (;), which servlet containers drop and other servers keep', () => {
  it.each([
    '/api/admin;jsessionid=1/report',
    '/api/Admin;x',
    '/api/;x/admin/report',
    '/api/items;v=2?size=100000',
  ])('%s: the two readings have different routes: 400 invalid_path, the upstream sees nothing', async (path) => {
    expect(await get(path)).toEqual({ status: 400, code: 'invalid_path', url: undefined });
    expect(await get(path, alice)).toEqual({ status: 400, code: 'invalid_path', url: undefined });
  });

  it('a parameter that leaves the route the same is judged by that route and forwarded as written', async () => {
    expect(await get('/api/admin/report;v=2')).toEqual({ status: 403, code: 'forbidden', url: undefined });
    expect(await get('/api/admin/report;v=2', alice)).toEqual({ status: 200, url: '/api/admin/report;v=2' });
    expect(await get('/api/other;v=2/x')).toEqual({ status: 200, url: '/api/other;v=2/x' });
    // An escaped semicolon is data to every server.
    expect(await get('/api/admin%3Bx/report')).toEqual({ status: 200, url: '/api/admin%3Bx/report' });
  });
});

describe('trailing dots and spaces on a segment, which IIS and ASP.NET drop and other servers keep', () => {
  it.each([
    '/api/admin./x',
    '/api/admin%20/x',
    '/api/admin.%20./x',
    '/api/ADMIN..',
    '/api/admin%09/x',
    '/api/admin%C2%A0/x',
    '/api/%20/admin/report',
    '/api/admin%20;x/report',
    '/api/admin.;x/report',
    '/api/items.?size=100000',
  ])('%s: the two readings have different routes: 400 invalid_path, the upstream sees nothing', async (path) => {
    expect(await get(path)).toEqual({ status: 400, code: 'invalid_path', url: undefined });
    expect(await get(path, alice)).toEqual({ status: 400, code: 'invalid_path', url: undefined });
  });

  it('a dot segment with a trailing space (..%20) is refused outright', async () => {
    expect(await get('/api/x/..%20/admin/report')).toEqual({ status: 400, code: 'invalid_path', url: undefined });
    expect(await get('/api/admin/.%20/x', alice)).toEqual({ status: 400, code: 'invalid_path', url: undefined });
  });

  it('a trailing dot or space that leaves the route the same is judged by that route and forwarded as written', async () => {
    expect(await get('/api/admin/report.')).toEqual({ status: 403, code: 'forbidden', url: undefined });
    expect(await get('/api/admin/report.', alice)).toEqual({ status: 200, url: '/api/admin/report.' });
    expect(await get('/api/other%20/file.json.')).toEqual({ status: 200, url: '/api/other%20/file.json.' });
    expect(await get('/api/admin.x/report')).toEqual({ status: 200, url: '/api/admin.x/report' });
    expect(await get('/api/...')).toEqual({ status: 200, url: '/api/...' });
  });

  it('a WebSocket handshake is held to the same rule', async () => {
    const before = gw.echo.received.length;
    const answer = parseAnswer(await exchange(gw.port, handshake('/api/admin./live', { Authorization: carol }), 1000));
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'invalid_path' });
    expect(gw.echo.received.length).toBe(before);
  });
});

describe('other spellings of the paging names are refused (400), never forwarded beside the canonical ones', () => {
  it.each([
    ['size=10&size[]=100000', 'invalid_page_size'],
    ['size=10&size[0]=100000', 'invalid_page_size'],
    ['size=10&size%5B%5D=100000', 'invalid_page_size'],
    ['size=10&SIZE=100000', 'invalid_page_size'],
    ['size=10&size.x=100000', 'invalid_page_size'],
    ['size=10&[size]=100000', 'invalid_page_size'],
    ['page=1&page[]=2', 'invalid_page'],
    ['Sort=x', 'invalid_sort'],
    ['size%00=1', 'invalid_page_size'],
    ['size=10&size%00=100000', 'invalid_page_size'],
    ['size%0D%0A=100000', 'invalid_page_size'],
    ['size%20=100000', 'invalid_page_size'],
    ['size%E2%80%8B=100000', 'invalid_page_size'],
    ['page%00=2', 'invalid_page'],
  ])('/api/items?%s → %s', async (query, code) => {
    expect(await get(`/api/items?${query}`)).toEqual({ status: 400, code, url: undefined });
  });

  it('canonical names and other parameters still pass', async () => {
    expect(await get('/api/items?size=10&sizes=3&a.size=4')).toEqual({ status: 200, url: '/api/items?sizes=3&a.size=4&size=10&page=0' });
  });

  it('on a route without paging, the names are the upstream\'s business', async () => {
    expect(await get('/api/other?size[]=100000')).toEqual({ status: 200, url: '/api/other?size[]=100000' });
  });
});
