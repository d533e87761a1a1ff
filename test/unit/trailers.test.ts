import { describe, expect, it } from 'vitest';
import { REMOVED_HEADERS } from '../../src/core/header-table.js';
import { announcedTrailers, asksForTrailers, isPassedField, passedTrailers } from '../../src/proxy/trailers.js';

describe('trailer fields', () => {
  it('every name of the removed-headers table is dropped, families by prefix, in any case and with `_`', () => {
    for (const h of REMOVED_HEADERS) {
      const name = h.family ? `${h.name}anything` : h.name;
      expect(isPassedField(name), name).toBe(false);
      expect(isPassedField(name.toUpperCase()), name).toBe(false);
      expect(isPassedField(name.replace(/-/g, '_')), name).toBe(false);
    }
  });

  it('hop-by-hop, framing and pseudo-header fields are dropped; gRPC and other end-to-end ones pass', () => {
    for (const name of ['connection', 'te', 'trailer', 'transfer-encoding', 'content-length', 'host', 'upgrade', 'proxy-authorization', ':status']) {
      expect(isPassedField(name), name).toBe(false);
    }
    for (const name of ['grpc-status', 'grpc-message', 'grpc-status-details-bin', 'x-checksum', 'server-timing', 'link']) {
      expect(isPassedField(name), name).toBe(true);
    }
  });

  it('passedTrailers keeps what passes, undefined when nothing does', () => {
    expect(passedTrailers({ 'grpc-status': '0', 'x-authenticated-user': 'mallory' })).toEqual({ 'grpc-status': '0' });
    expect(passedTrailers({ authorization: 'Basic x' })).toBeUndefined();
    expect(passedTrailers(undefined)).toBeUndefined();
  });

  it('a Trailer announcement loses the names that do not pass', () => {
    expect(announcedTrailers('grpc-status, X-Authenticated-User,grpc-message')).toBe('grpc-status, grpc-message');
    expect(announcedTrailers('authorization')).toBeUndefined();
    expect(announcedTrailers(undefined)).toBeUndefined();
  });

  it('TE asks for trailers only when it lists `trailers`', () => {
    expect(asksForTrailers('trailers')).toBe(true);
    expect(asksForTrailers('deflate, Trailers')).toBe(true);
    expect(asksForTrailers('trailers;q=1')).toBe(true);
    expect(asksForTrailers('gzip')).toBe(false);
    expect(asksForTrailers('x-trailers')).toBe(false);
    expect(asksForTrailers(undefined)).toBe(false);
  });
});
