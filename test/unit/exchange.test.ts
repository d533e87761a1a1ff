import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { newExchange } from '../../src/core/exchange.js';

/** An exchange of a request with these raw header lines, on an unconnected socket. */
function exchangeWith(raw: string[]) {
  const req = new IncomingMessage(new Socket());
  req.method = 'GET';
  req.url = '/v1/conversations';
  req.rawHeaders = raw;
  return newExchange(req, new ServerResponse(req), 0);
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('the request id of an exchange', () => {
  it('is the one the request carries when it is well-formed, whatever the case of the name', () => {
    expect(exchangeWith(['Host', 'gw', 'X-Request-ID', 'abc.123:x-y_z']).requestId).toBe('abc.123:x-y_z');
    expect(exchangeWith(['x-request-id', 'r1']).requestId).toBe('r1');
  });

  it('is a new UUID when the request carries none, a malformed one, or two (Node would join them with a comma)', () => {
    expect(exchangeWith(['Host', 'gw']).requestId).toMatch(UUID_V4);
    expect(exchangeWith(['X-Request-Id', 'has space']).requestId).toMatch(UUID_V4);
    expect(exchangeWith(['X-Request-Id', 'x'.repeat(129)]).requestId).toMatch(UUID_V4);
    expect(exchangeWith(['X-Request-Id', 'a', 'x-request-id', 'b']).requestId).toMatch(UUID_V4);
  });

  it('is not on the response until a writer stamps it', () => {
    const ex = exchangeWith(['X-Request-Id', 'r2']);
    expect(ex.res.getHeader('x-request-id')).toBeUndefined();
    ex.stampId();
    expect(ex.res.getHeader('x-request-id')).toBe('r2');
  });
});
