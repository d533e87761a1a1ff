import { connect as h2connect, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { readFileSync } from 'node:fs';
import type { TLSSocket } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { makePki, type Pki } from '../support/client-pki.js';
import { waitUntil } from '../support/poll.js';
import { basic, gatewayFixture, jwtPayload } from '../support/fixtures.js';

/**
 * Client certificates over HTTP/2: the streams of one h2 connection share its certificate (the
 * certificate cache keys them by session), bound tokens hold over h2 as over HTTP/1.1, and a CRL change
 * reaches a session that was open before it at its next stream.
 */

interface Answer {
  status: number;
  json: Record<string, unknown>;
  headers: IncomingHttpHeaders;
}

/** An HTTP/2 connection to the gateway presenting the certificate `as` (none when undefined); h2 checked. */
async function session(pki: Pki, port: number, as?: string): Promise<ClientHttp2Session> {
  const s = h2connect(`https://127.0.0.1:${port}`, { ca: readFileSync(pki.ca), ...(as ? pki.identity(as) : {}) });
  await new Promise<void>((resolve, reject) => {
    s.once('connect', () => resolve());
    s.once('error', reject);
  });
  expect((s.socket as TLSSocket).alpnProtocol).toBe('h2');
  s.on('error', () => {});
  return s;
}

function call(s: ClientHttp2Session, path: string, headers: Record<string, string> = {}, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const stream = s.request({
      ':method': payload === undefined ? 'GET' : 'POST', ':path': path, ...headers,
      ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }),
    });
    let got: IncomingHttpHeaders = {};
    let text = '';
    stream.on('response', (h) => (got = h));
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (text += d));
    stream.on('end', () => {
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch { /* not JSON */ }
      resolve({ status: Number(got[':status']), json, headers: got });
    });
    stream.on('error', reject);
    stream.end(payload);
  });
}

function close(s: ClientHttp2Session): Promise<void> {
  return new Promise((resolve) => s.close(() => resolve()));
}

/** Waits until `probe` holds (a file change is polled by the gateway), for at most 10 s. */
const eventually = (probe: () => Promise<boolean>) => waitUntil(probe, 10_000);

describe('client certificates over HTTP/2', () => {
  let pki: Pki;
  const gw = gatewayFixture({
    before: () => {
      pki = makePki();
      pki.client('erin', '/OU=ops/CN=erin', 'email:erin@example.com', '14');
    },
    config: (f) => ({
      server: {
        host: '127.0.0.1', port: 0,
        tls: { certFile: pki.serverCert, keyFile: pki.serverKey, reloadIntervalMs: 100, clientCa: pki.ca, crlFile: pki.crl, clientCerts: 'request', userFrom: 'cn' },
      },
      upstreams: { echo: { url: f.echo.url } },
      routes: [
        { path: '/v1/things', upstream: 'echo' },
        { path: '/v1/ops', upstream: 'echo', allow: { groups: ['ops'] } },
      ],
    }),
    after: () => pki.remove(),
  });
  const lastReceived = () => gw.echo.received.at(-1)!;

  it('a verified certificate is the identity of every stream of its connection', async () => {
    const s = await session(pki, gw.port, 'alice');
    try {
      const answers = await Promise.all([call(s, '/v1/things?n=1'), call(s, '/v1/ops?n=2'), call(s, '/v1/things?n=3')]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
      for (const n of [1, 2, 3]) {
        const seen = gw.echo.received.find((r) => r.url.endsWith(`n=${n}`))!.headers;
        expect(seen['x-authenticated-user']).toBe('alice');
        expect(seen['x-authenticated-via']).toBe('mtls');
        expect(seen['x-authenticated-groups']).toBe('dev,ops');
      }
    } finally {
      await close(s);
    }
    // Another connection with another certificate is another identity (nothing leaks between sessions).
    const b = await session(pki, gw.port, 'bob');
    try {
      expect((await call(b, '/v1/things')).status).toBe(200);
      expect(lastReceived().headers['x-authenticated-user']).toBe('bob');
      expect((await call(b, '/v1/ops')).status).toBe(403);
    } finally {
      await close(b);
    }
  });

  it('without a certificate an h2 connection is served with a credential; an unknown CA\'s is refused on every stream', async () => {
    const none = await session(pki, gw.port);
    try {
      expect((await call(none, '/v1/things')).json.code).toBe('missing_credentials');
      expect((await call(none, '/v1/things', { authorization: basic('alice', 'alice-pw') })).status).toBe(200);
      expect(lastReceived().headers['x-authenticated-via']).toBe('basic');
    } finally {
      await close(none);
    }
    const foreign = await session(pki, gw.port, 'mallory');
    try {
      for (const headers of [{}, { authorization: basic('alice', 'alice-pw') }] as Array<Record<string, string>>) {
        const res = await call(foreign, '/v1/things', headers);
        expect(res.status).toBe(401);
        expect(res.json.code).toBe('invalid_credentials');
      }
    } finally {
      await close(foreign);
    }
  });

  it('a token pair created over h2 with certificate A is accepted over h2 with A only; its refresh token too', async () => {
    const a = await session(pki, gw.port, 'alice');
    const b = await session(pki, gw.port, 'bob');
    const none = await session(pki, gw.port);
    try {
      const created = await call(a, '/v1/tokens/create', {}, { appKey: 'alice', appSecret: 'alice-pw' });
      expect(created.status).toBe(200);
      const { accessToken, refreshToken } = created.json as { accessToken: string; refreshToken: string };
      expect(jwtPayload(accessToken).cnf).toEqual({ 'x5t#S256': pki.thumbprint('alice') });
      const bearer = { authorization: `Bearer ${accessToken}` };

      expect((await call(a, '/v1/things', bearer)).status).toBe(200);
      expect(lastReceived().headers['x-authenticated-via']).toBe('bearer');
      for (const [name, other] of [['bob', b], ['none', none]] as const) {
        const refused = await call(other, '/v1/things', bearer);
        expect(refused.status, name).toBe(401);
        expect(refused.json.code, name).toBe('invalid_token');
        expect(String(refused.headers['www-authenticate']), name).toContain('error="invalid_token"');
        expect((await call(other, '/v1/tokens/refresh', {}, { refreshToken })).json.code, name).toBe('invalid_refresh_token');
      }
      const refreshed = await call(a, '/v1/tokens/refresh', {}, { refreshToken });
      expect(refreshed.status).toBe(200);
      const next = (refreshed.json as { accessToken: string }).accessToken;
      expect(jwtPayload(next).cnf).toEqual({ 'x5t#S256': pki.thumbprint('alice') });
      expect((await call(a, '/v1/things', { authorization: `Bearer ${next}` })).status).toBe(200);
      expect((await call(b, '/v1/things', { authorization: `Bearer ${next}` })).status).toBe(401);
    } finally {
      await Promise.all([close(a), close(b), close(none)]);
    }
  });

  it('a CRL change applies to an h2 connection opened before it, at its next stream; the others are untouched', async () => {
    const erin = await session(pki, gw.port, 'erin');
    const alice = await session(pki, gw.port, 'alice');
    try {
      expect((await call(erin, '/v1/things')).status).toBe(200);
      expect(lastReceived().headers['x-authenticated-user']).toBe('erin');
      const port = (erin.socket as TLSSocket).localPort;
      pki.revoke('erin');
      pki.writeCrl();
      // The gateway polls the CRL file: wait until the open session's next stream is refused.
      let refused: Answer | undefined;
      await eventually(async () => {
        const res = await call(erin, '/v1/things');
        if (res.status === 200) return false;
        refused = res;
        return true;
      });
      expect(refused!.status).toBe(401);
      expect(refused!.json.code).toBe('invalid_credentials');
      expect(String(refused!.json.detail)).toContain('CERT_REVOKED');
      // The same connection, not a new one.
      expect((erin.socket as TLSSocket).localPort).toBe(port);
      expect(erin.closed).toBe(false);
      // A credential does not get past a revoked certificate either.
      expect((await call(erin, '/v1/things', { authorization: basic('alice', 'alice-pw') })).status).toBe(401);
      // Alice's session, open all along, keeps being served.
      expect((await call(alice, '/v1/things')).status).toBe(200);
      expect(lastReceived().headers['x-authenticated-user']).toBe('alice');
    } finally {
      await Promise.all([close(erin), close(alice)]);
    }
  });
});

describe('client certificates and TLS session resumption', () => {
  let pki: Pki;
  const gw = gatewayFixture({
    before: () => {
      pki = makePki();
      pki.client('frank', '/OU=ops/CN=frank', 'email:frank@example.com', '15');
    },
    config: (f) => ({
      server: {
        host: '127.0.0.1', port: 0,
        tls: { certFile: pki.serverCert, keyFile: pki.serverKey, reloadIntervalMs: 100, clientCa: pki.ca, crlFile: pki.crl, clientCerts: 'request', userFrom: 'cn' },
      },
      upstreams: { echo: { url: f.echo.url } },
      routes: [{ path: '/v1/things', upstream: 'echo' }],
    }),
    after: () => pki.remove(),
  });

  // A resumed TLS session skips the certificate check of a full handshake. The CRL reload replaces the
  // listener's secure context, and with it the session ticket keys, so a ticket issued before the change
  // no longer resumes; whichever way the handshake goes, the certificate must be refused.
  it('a TLS session ticket from before a CRL change revoked its certificate gets it no further', async () => {
    const first = h2connect(`https://127.0.0.1:${gw.port}`, { ca: readFileSync(pki.ca), ...pki.identity('frank') });
    first.on('error', () => {});
    const ticket = new Promise<Buffer>((resolve) => (first.socket as TLSSocket).once('session', resolve));
    expect((await call(first, '/v1/things')).status).toBe(200);
    const saved = await ticket;
    await close(first);

    pki.revoke('frank');
    pki.writeCrl();
    // A new connection without the session: a full handshake, refused once the CRL is read.
    await eventually(async () => {
      const s = await session(pki, gw.port, 'frank');
      try {
        return (await call(s, '/v1/things')).status === 401;
      } finally {
        await close(s);
      }
    });
    const resumed = h2connect(`https://127.0.0.1:${gw.port}`, { ca: readFileSync(pki.ca), ...pki.identity('frank'), session: saved });
    resumed.on('error', () => {});
    try {
      await new Promise<void>((resolve, reject) => {
        resumed.once('connect', () => resolve());
        resumed.once('error', reject);
      });
      const res = await call(resumed, '/v1/things');
      expect(res.status).toBe(401);
      expect(res.json.code).toBe('invalid_credentials');
      expect(String(res.json.detail)).toContain('CERT_REVOKED');
    } finally {
      await close(resumed);
    }
  });
});
