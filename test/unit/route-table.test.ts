import { describe, expect, it } from 'vitest';
import type { RouteConfig } from '../../src/config/types.js';
import { RouteTable } from '../../src/routes/route-table.js';

function route(path: string, extra: Partial<RouteConfig> = {}): RouteConfig {
  return {
    path, upstream: 'api', forwardAuthorization: false, stripPrefix: false, allowHeaders: [],
    timeouts: { connectMs: 1000, responseMs: 1000, idleMs: 1000 }, ...extra,
  } as RouteConfig;
}

const table = new RouteTable(
  [route('/api'), route('/api/admin', { allow: { groups: ['admins'] } }), route('/api/items', { paging: { sizes: [10], defaultSize: 10, sortable: [] } })],
  { api: { url: 'http://127.0.0.1:1' } } as never,
);

describe('RouteTable: routes match without regard to case (as Express, ASP.NET and IIS route)', () => {
  it.each([
    ['/api/admin/report', '/api/admin'],
    ['/api/ADMIN/report', '/api/admin'],
    ['/api/Admin', '/api/admin'],
    ['/API/admin/', '/api/admin'],
    ['/api/ITEMS', '/api/items'],
    ['/Api/Items/7', '/api/items'],
    ['/api/other', '/api'],
    ['/API', '/api'],
    ['/api/adminX', '/api'],
  ])('%s → %s', (path, expected) => {
    expect(table.match(path)?.path).toBe(expected);
  });

  it('the route keeps its configured spelling (a stripped prefix is cut by its length)', () => {
    const mixed = new RouteTable([route('/Api/Reports', { stripPrefix: true })], { api: { url: 'http://127.0.0.1:1' } } as never);
    expect(mixed.match('/api/reports/7')?.path).toBe('/Api/Reports');
    expect(mixed.match('/API/REPORTS')?.path).toBe('/Api/Reports');
    expect(mixed.match('/api/reportsX')).toBeUndefined();
  });

  it('no route: undefined', () => {
    expect(new RouteTable([route('/v1/a')], { api: { url: 'http://127.0.0.1:1' } } as never).match('/v2/A')).toBeUndefined();
  });
});
