import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { request } from 'node:https';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { makePki, type Pki } from '../support/client-pki.js';
import { basic, gatewayFixture } from '../support/fixtures.js';

/**
 * The client-certificate paths beside the common ones: the user from a URI or DNS subjectAltName, the
 * "exactly one CN" rule, a WebSocket tunnel opened by a certificate and ended by a CRL change, and TLS
 * renegotiation (a connection may not swap the certificate it was judged by).
 */

let pki: Pki;
beforeAll(() => {
  pki = makePki();
  // Two CNs, none, and two URIs / DNS names (the first one is the user).
  pki.client('twocn', '/OU=ops/CN=first/CN=second', 'DNS:twocn.example', '20');
  pki.client('nocn', '/O=Example/OU=ops', 'URI:spiffe://example/nocn', '21');
  pki.client('many', '/OU=ops/CN=many', 'URI:spiffe://example/one,URI:spiffe://example/two,DNS:one.example,DNS:two.example', '22');
  pki.client('tunnel', '/OU=ops/CN=tunnel', 'email:tunnel@example.com', '23');
  // An OU value with a comma: as one group it would read as two in the groups header.
  pki.client('comma', '/OU=staff,admins/OU=ops/CN=comma', 'email:comma@example.com', '25');
});
afterAll(() => pki.remove());

interface Answer {
  status: number;
  json: Record<string, unknown>;
}

function call(port: number, path: string, as?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, ca: readFileSync(pki.ca), agent: false, ...(as ? pki.identity(as) : {}) }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch { /* not JSON */ }
        resolve({ status: res.statusCode!, json });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

function tlsSettings(userFrom: string) {
  return { certFile: pki.serverCert, keyFile: pki.serverKey, reloadIntervalMs: 100, clientCa: pki.ca, crlFile: pki.crl, clientCerts: 'request', userFrom };
}

describe.each([
  { userFrom: 'san-uri', users: { alice: 'spiffe://example/alice', many: 'spiffe://example/one', nocn: 'spiffe://example/nocn' }, without: ['bob', 'twocn'] },
  { userFrom: 'san-dns', users: { alice: 'alice.example', many: 'one.example', twocn: 'twocn.example' }, without: ['bob', 'nocn'] },
  { userFrom: 'cn', users: { alice: 'alice', many: 'many' }, without: ['twocn', 'nocn'] },
])('server.tls.userFrom: $userFrom', ({ userFrom, users, without }) => {
  const gw = gatewayFixture({
    config: (f) => ({
      server: { host: '127.0.0.1', port: 0, tls: tlsSettings(userFrom) },
      upstreams: { echo: { url: f.echo.url } },
      routes: [{ path: '/v1/things', upstream: 'echo' }],
    }),
  });

  it('the user is the first value of its kind; the groups are the OU values', async () => {
    for (const [as, user] of Object.entries(users)) {
      const res = await call(gw.port, `/v1/things?as=${as}`, as);
      expect(res.status, as).toBe(200);
      const seen = gw.echo.received.find((r) => r.url.endsWith(`as=${as}`))!.headers;
      expect(seen['x-authenticated-user'], as).toBe(user);
      expect(seen['x-authenticated-via'], as).toBe('mtls');
      expect(seen['x-authenticated-groups'], as).toBe(as === 'alice' ? 'dev,ops' : 'ops');
    }
  });

  it(`a verified certificate without a usable ${userFrom === 'cn' ? 'CN (none, or more than one)' : 'value of that kind'} is 401 and never reaches the upstream`, async () => {
    for (const as of without) {
      const res = await call(gw.port, `/v1/things?refused=${as}`, as);
      expect(res.status, as).toBe(401);
      expect(res.json.code, as).toBe('invalid_credentials');
      expect(String(res.json.detail), as).toContain(`userFrom: ${userFrom}`);
    }
    expect(gw.echo.received.some((r) => r.url.includes('refused='))).toBe(false);
  });
});

describe('OU values that cannot be group names', () => {
  const gw = gatewayFixture({
    config: (f) => ({
      server: { host: '127.0.0.1', port: 0, tls: tlsSettings('cn') },
      upstreams: { echo: { url: f.echo.url } },
      routes: [{ path: '/v1/things', upstream: 'echo' }, { path: '/v1/admin', upstream: 'echo', allow: { groups: ['admins'] } }],
    }),
  });

  it('an OU with a comma is dropped, never split into two groups', async () => {
    expect((await call(gw.port, '/v1/things?as=comma', 'comma')).status).toBe(200);
    expect(gw.echo.received.at(-1)!.headers['x-authenticated-groups']).toBe('ops');
    expect((await call(gw.port, '/v1/admin', 'comma')).status).toBe(403);
  });
});

interface WsUpstream {
  url: string;
  handshakes: IncomingMessage[];
  close(): Promise<void>;
}

async function wsUpstream(): Promise<WsUpstream> {
  const server: Server = createServer((_req, res) => res.end('plain http'));
  const wss = new WebSocketServer({ server });
  const up: WsUpstream = { url: '', handshakes: [], close: async () => {} };
  wss.on('connection', (ws, req) => {
    up.handshakes.push(req);
    ws.on('message', (data) => ws.send(`echo:${data.toString()}`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  up.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  up.close = () => new Promise((resolve) => {
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return up;
}

describe('a WebSocket tunnel opened by a client certificate, and TLS renegotiation', () => {
  let ws: WsUpstream;
  const gw = gatewayFixture({
    log: 'info',
    before: async () => {
      ws = await wsUpstream();
    },
    config: (f) => ({
      server: { host: '127.0.0.1', port: 0, tls: tlsSettings('cn') },
      log: { level: 'info', access: true },
      upstreams: { echo: { url: f.echo.url }, ws: { url: ws.url } },
      routes: [{ path: '/v1/things', upstream: 'echo' }, { path: '/v1/live', upstream: 'ws', allow: { groups: ['ops'] } }, { path: '/v1/feed', upstream: 'ws' }],
    }),
    after: () => ws.close(),
  });

  function openWs(as: string | undefined): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const client = new WebSocket(`wss://127.0.0.1:${gw.port}/v1/live`, { ca: readFileSync(pki.ca), ...(as ? pki.identity(as) : {}) });
      client.once('open', () => resolve(client));
      client.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode })));
      client.once('error', reject);
    });
  }

  function echo(client: WebSocket, text: string): Promise<string> {
    return new Promise((resolve) => {
      client.once('message', (m) => resolve(String(m)));
      client.send(text);
    });
  }

  it('the handshake is authenticated by the certificate (HTTP/1.1), the tunnel carries frames, and a CRL revoking it ends the tunnel', async () => {
    await expect(openWs(undefined)).rejects.toMatchObject({ status: 401 });
    const client = await openWs('tunnel');
    const closed = new Promise<number>((resolve) => client.once('close', (code) => resolve(code)));
    try {
      const handshake = ws.handshakes.at(-1)!;
      expect(handshake.headers['x-authenticated-user']).toBe('tunnel');
      expect(handshake.headers['x-authenticated-via']).toBe('mtls');
      expect(handshake.headers['x-authenticated-groups']).toBe('ops');
      expect(await echo(client, 'hello')).toBe('echo:hello');

      const revokedAt = Date.now();
      pki.revoke('tunnel');
      pki.writeCrl();
      // The gateway polls the CRL (every 100 ms here) and checks open tunnels again on the change (and
      // every 5 s anyway): the tunnel is cut, so the client sees an abnormal closure.
      const code = await Promise.race([closed, new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), 15_000))]);
      expect(code).toBe(1006);
      expect(Date.now() - revokedAt).toBeLessThan(15_000);
      const line = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'websocket closed' && l.user === 'tunnel');
      expect(line).toMatchObject({ via: 'mtls', reason: 'certificate revoked' });
      // And it cannot open a new one.
      await expect(openWs('tunnel')).rejects.toMatchObject({ status: 401 });
    } finally {
      client.terminate();
    }
  });

  it('a tunnel opened with a credential over a certificate ends too when a CRL revokes that certificate', async () => {
    pki.client('carrier', '/OU=ops/CN=carrier', 'email:carrier@example.com', '24');
    const client = await new Promise<WebSocket>((resolve, reject) => {
      const c = new WebSocket(`wss://127.0.0.1:${gw.port}/v1/feed`, { ca: readFileSync(pki.ca), ...pki.identity('carrier'), headers: { authorization: basic('alice', 'alice-pw') } });
      c.once('open', () => resolve(c));
      c.once('error', reject);
    });
    const closed = new Promise<number>((resolve) => client.once('close', (code) => resolve(code)));
    try {
      expect(ws.handshakes.at(-1)!.headers['x-authenticated-via']).toBe('basic');
      expect(await echo(client, 'still here')).toBe('echo:still here');
      pki.revoke('carrier');
      pki.writeCrl();
      const code = await Promise.race([closed, new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), 15_000))]);
      expect(code).toBe(1006);
      const line = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'websocket closed' && l.user === 'alice');
      expect(line).toMatchObject({ via: 'basic', reason: 'certificate revoked' });
    } finally {
      client.terminate();
    }
  });

  it('refuses TLS renegotiation: the connection is closed, the certificate it was judged by stays its only one', async () => {
    // TLS 1.3 has no renegotiation at all; a TLS 1.2 client asks for one on an open connection.
    const socket = tlsConnect({ host: '127.0.0.1', port: gw.port, ca: readFileSync(pki.ca), ...pki.identity('alice'), maxVersion: 'TLSv1.2', ALPNProtocols: ['http/1.1'] });
    socket.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', () => resolve());
      socket.once('error', reject);
    });
    expect(socket.getProtocol()).toBe('TLSv1.2');
    const request = (path: string) => socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    const firstAnswer = new Promise<string>((resolve) => socket.once('data', (d: Buffer) => resolve(d.toString('latin1'))));
    request('/v1/things?before=renegotiation');
    expect(await firstAnswer).toMatch(/^HTTP\/1\.1 200 /);

    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const outcome = new Promise<Error | null>((resolve) => {
      const started = socket.renegotiate({ rejectUnauthorized: true }, (err) => resolve(err));
      if (!started) resolve(new Error('renegotiation not started'));
    });
    // Whichever comes first: the renegotiation fails and the connection closes.
    const err = await Promise.race([outcome, closed.then(() => new Error('closed'))]);
    expect(err).toBeInstanceOf(Error);
    await closed;
    expect(socket.destroyed).toBe(true);
    // The listener is unharmed.
    expect((await call(gw.port, '/v1/things', 'alice')).status).toBe(200);
  });

  it('refuses TLS renegotiation on an HTTP/2 connection too', async () => {
    const socket = tlsConnect({ host: '127.0.0.1', port: gw.port, ca: readFileSync(pki.ca), ...pki.identity('alice'), maxVersion: 'TLSv1.2', ALPNProtocols: ['h2'] });
    socket.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', () => resolve());
      socket.once('error', reject);
    });
    expect((socket as TLSSocket).alpnProtocol).toBe('h2');
    // Read (and drop) what the server sends: its SETTINGS, then the end of the connection.
    socket.resume();
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.renegotiate({ rejectUnauthorized: true }, () => {});
    await closed;
    expect(socket.destroyed).toBe(true);
  });
});
