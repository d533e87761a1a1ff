import { describe, expect, it } from 'vitest';
import { canonicalQuery } from '../../src/paging/normalize.js';
import { normalizePath } from '../../src/core/path.js';
import { refusalOf } from '../support/refusal.js';

const rules = { sizes: [10, 20, 50, 100, 200], defaultSize: 20, sortable: ['campaignId', 'createdAt'] };

describe('canonicalQuery', () => {
  it.each([
    ['', 'size=20&page=0'],
    ['q=%FF&size=10', 'q=%FF&size=10&page=0'],
    ['a=b+c&x=%20y&page=2', 'a=b+c&x=%20y&size=20&page=2'],
    ['flag&size=50', 'flag&size=50&page=0'],
    ['%73ize=10', 'size=10&page=0'],
    ['si%zze=10', 'si%zze=10&size=20&page=0'],
    ['sort=campaignId,DESC&q=1&sort=createdAt', 'q=1&size=20&page=0&sort=campaignId%2Cdesc&sort=createdAt%2Casc'],
    ['&&size=10&&', 'size=10&page=0'],
  ])('%j → %j', (search, expected) => {
    expect(canonicalQuery(search, rules)).toBe(expected);
  });

  it.each([['size=%ZZ', 'invalid_page_size'], ['%73ize=15', 'invalid_page_size'], ['page=1&p%61ge=2', 'invalid_page']])(
    'refuses %j with %s, however the name is encoded',
    (search, code) => {
      expect(refusalOf(() => canonicalQuery(search, rules))).toMatchObject({ status: 400, code });
    },
  );
});

describe('normalizePath, Tomcat-style path parameters', () => {
  it.each(['/v1/conversations/..;/contacts', '/v1/conversations/.;x/contacts', '/v1/%2e%2e;/x'])('refuses %s', (path) => {
    expect(refusalOf(() => normalizePath(path))).toMatchObject({ status: 400, code: 'invalid_path' });
  });

  it('keeps ; inside ordinary segments', () => {
    expect(normalizePath('/v1/contacts/a;b')).toBe('/v1/contacts/a;b');
  });
});
