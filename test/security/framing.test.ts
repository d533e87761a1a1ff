import { describe, expect, it } from 'vitest';
import { basic, gatewayFixture } from '../support/fixtures.js';
import { exchangeUntilClosed } from '../support/raw-client.js';

// =============================================================================================
// Request framing, from the outside: every method the gateway forwards × every way a client can
// frame a body, written byte for byte on a raw socket. The upstream is a real HTTP server that
// records each request it parses. Whatever the client sends, the upstream must see exactly one
// request per client request, with the body intact: a body that carries a second request must
// never become a second request on the pooled upstream connection (request smuggling).
// =============================================================================================

const ALICE = basic('alice', 'alice-pw');
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND'] as const;

const gw = gatewayFixture({
  config: (f) => ({
    upstreams: { up: { url: f.echo.url } },
    routes: [{ path: '/v1/contacts', upstream: 'up', forwardAuthorization: true }],
  }),
});

/** A complete request for another user, as an attacker would hide it in a body. */
function hiddenRequest(tag: string): string {
  return `GET /v1/contacts/smuggled-${tag} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Authenticated-User: mallory\r\nX-Authenticated-Via: basic\r\nContent-Length: 0\r\n\r\n`;
}

interface Framing {
  name: string;
  /** The framing header lines and the encoded body. */
  encode(body: string): { headers: string; bytes: string };
  /** Bodies this framing can carry (no framing carries none). */
  bodies: Array<'empty' | 'small'>;
}

const chunk = (s: string) => (s === '' ? '' : `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`);

const FRAMINGS: Framing[] = [
  { name: 'Content-Length', encode: (b) => ({ headers: `Content-Length: ${Buffer.byteLength(b)}\r\n`, bytes: b }), bodies: ['empty', 'small'] },
  // The body split over two chunks, then the last chunk.
  { name: 'chunked', encode: (b) => ({ headers: 'Transfer-Encoding: chunked\r\n', bytes: `${chunk(b.slice(0, 7))}${chunk(b.slice(7))}0\r\n\r\n` }), bodies: ['empty', 'small'] },
  { name: 'no framing', encode: () => ({ headers: '', bytes: '' }), bodies: ['empty'] },
];

interface Case {
  name: string;
  method: string;
  framing: Framing;
  body: string;
  tag: string;
}

const CASES: Case[] = METHODS.flatMap((method) => FRAMINGS.flatMap((framing) => framing.bodies.map((size) => {
  const tag = `${method}-${framing.name.replace(/\W+/g, '')}-${size}`.toLowerCase();
  return { name: `${method} × ${framing.name} × ${size} body`, method, framing, body: size === 'empty' ? '' : hiddenRequest(tag), tag };
})));

/** Writes bytes to a fresh connection; resolves with everything read once the gateway closes it. */
const exchange = (bytes: string) => exchangeUntilClosed(gw.port, bytes);

const settle = () => new Promise((r) => setTimeout(r, 100));

describe('request framing: one client request is one upstream request, body intact', () => {
  it.each(CASES)('$name', async (c) => {
    const before = gw.echo.received.length;
    const { headers, bytes } = c.framing.encode(c.body);
    const path = `/v1/contacts/${c.tag}`;
    const answer = await exchange(`${c.method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\n${headers}Connection: close\r\n\r\n${bytes}`);
    // Whatever the upstream does with a hidden request, it would do it on the pooled connection
    // just after the real one: give it the time to arrive.
    await settle();

    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    const arrived = gw.echo.received.slice(before);
    expect(arrived.map((r) => `${r.method} ${r.url}`), 'the upstream must see exactly the one request sent').toEqual([`${c.method} ${path}`]);
    expect(arrived[0]!.body).toBe(c.body);
    expect(arrived[0]!.headers['x-authenticated-user']).toBe('alice');
  });

  it('a pipelined second request on the client connection is authenticated on its own, never folded into the first', async () => {
    const before = gw.echo.received.length;
    const first = `DELETE /v1/contacts/one HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${ALICE}\r\nTransfer-Encoding: chunked\r\n\r\n${chunk(hiddenRequest('pipelined'))}0\r\n\r\n`;
    const second = 'GET /v1/contacts/two HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n';
    const answer = await exchange(first + second);
    await settle();
    const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '401']);
    expect(gw.echo.received.slice(before).map((r) => r.url)).toEqual(['/v1/contacts/one']);
  });

  it('no request the upstream ever received was a smuggled one', () => {
    expect(gw.echo.received.filter((r) => r.url.includes('smuggled'))).toEqual([]);
    expect(gw.echo.received.filter((r) => r.headers['x-authenticated-user'] !== 'alice')).toEqual([]);
  });

  it('the gateway still answers /healthz', async () => {
    expect(await exchange('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  });
});
