import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request, type RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { newKeyPem } from '../support/assertion-keys.js';
import { makePki, type Pki } from '../support/client-pki.js';
import { waitUntil } from '../support/poll.js';
import { basic, gatewayFixture, jwtPayload } from '../support/fixtures.js';

interface Answer {
  status: number;
  body: string;
  json: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
  localPort: number;
}

interface Call extends RequestOptions {
  /** A client certificate of the test PKI to present. */
  as?: string;
  body?: unknown;
}

function httpsCall(pki: Pki, port: number, path: string, { as, body, ...options }: Call = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request({
      host: '127.0.0.1', port, path, ca: readFileSync(pki.ca), agent: false,
      ...(as ? pki.identity(as) : {}),
      ...(payload === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json', ...options.headers } }),
      ...options,
    }, (res) => {
      let text = '';
      const localPort = (res.socket as TLSSocket).localPort!;
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch { /* not JSON */ }
        resolve({ status: res.statusCode!, body: text, json, headers: res.headers, localPort });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** Waits until `probe` holds (a file change is polled by the gateway), for at most 10 s. */
const eventually = (probe: () => Promise<boolean>) => waitUntil(probe, 10_000);

describe('client certificates, server.tls.clientCerts: request', () => {
  let pki: Pki;
  const keyDir = mkdtempSync(join(tmpdir(), 'gw-mtls-keys-'));
  const assertionKey = join(keyDir, 'assertion.pem');
  writeFileSync(assertionKey, newKeyPem('ES256'));
  const gw = gatewayFixture({
    log: 'info',
    before: () => {
      pki = makePki();
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
      identity: { assertion: { keyFile: assertionKey } },
      forwardAuth: { path: '/auth/verify' },
      log: { level: 'info', access: true },
    }),
    after: () => {
      pki.remove();
      rmSync(keyDir, { recursive: true, force: true });
    },
  });
  const call = (path: string, options?: Call) => httpsCall(pki, gw.port, path, options);
  const lastReceived = () => gw.echo.received.at(-1)!;
  /** The access line of a request (written once its answer is out). */
  const accessLine = async (requestId: unknown) => {
    const find = () => gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request' && l.requestId === requestId);
    await eventually(async () => find() !== undefined);
    return find();
  };

  it('a verified certificate is the identity: the upstream sees its CN as the user, its OUs as groups, and the assertion its thumbprint', async () => {
    const res = await call('/v1/things', { as: 'alice' });
    expect(res.status).toBe(200);
    const seen = lastReceived().headers;
    expect(seen['x-authenticated-user']).toBe('alice');
    expect(seen['x-authenticated-via']).toBe('mtls');
    expect(seen['x-authenticated-groups']).toBe('dev,ops');
    const assertion = jwtPayload(seen['x-identity-assertion'] as string);
    expect(assertion).toMatchObject({ sub: 'alice', via: 'mtls', groups: ['dev', 'ops'], cnf: { 'x5t#S256': pki.thumbprint('alice') } });
    expect(await accessLine(res.headers['x-request-id'])).toMatchObject({ user: 'alice', via: 'mtls', certificate: pki.thumbprint('alice'), status: 200 });
  });

  it('the allow rules judge the certificate\'s groups', async () => {
    expect((await call('/v1/ops', { as: 'alice' })).status).toBe(200);
    const bob = await call('/v1/ops', { as: 'bob' });
    expect(bob.status).toBe(403);
    expect(bob.json.code).toBe('forbidden');
  });

  it('without a certificate the listener still serves: Basic works, nothing at all is 401', async () => {
    const none = await call('/v1/things');
    expect(none.status).toBe(401);
    expect(none.json.code).toBe('missing_credentials');
    const withBasic = await call('/v1/things', { headers: { authorization: basic('alice', 'alice-pw') } });
    expect(withBasic.status).toBe(200);
    expect(lastReceived().headers['x-authenticated-via']).toBe('basic');
    expect(jwtPayload(lastReceived().headers['x-identity-assertion'] as string)).not.toHaveProperty('cnf');
  });

  it('a certificate of an unknown CA is never an identity: 401 on every request of its connection, credentials or not', async () => {
    const alone = await call('/v1/things', { as: 'mallory' });
    expect(alone.status).toBe(401);
    expect(alone.json.code).toBe('invalid_credentials');
    const withBasic = await call('/v1/things', { as: 'mallory', headers: { authorization: basic('alice', 'alice-pw') } });
    expect(withBasic.status).toBe(401);
    const create = await call('/v1/tokens/create', { as: 'mallory', body: { appKey: 'alice', appSecret: 'alice-pw' } });
    expect(create.status).toBe(401);
    expect(gw.echo.received.some((r) => r.headers['x-authenticated-via'] === 'mtls' && r.headers['x-authenticated-user'] === 'alice' && r.url.includes('mallory'))).toBe(false);
  });

  it('a revoked certificate (in the CRL) is refused', async () => {
    const res = await call('/v1/things', { as: 'carol' });
    expect(res.status).toBe(401);
    expect(res.json.code).toBe('invalid_credentials');
    expect(res.json.detail).toContain('CERT_REVOKED');
  });

  it('a certificate and a Basic credential: the credential decides, the certificate is recorded', async () => {
    const res = await call('/v1/things', { as: 'bob', headers: { authorization: basic('alice', 'alice-pw') } });
    expect(res.status).toBe(200);
    const seen = lastReceived().headers;
    expect(seen['x-authenticated-user']).toBe('alice');
    expect(seen['x-authenticated-via']).toBe('basic');
    expect(jwtPayload(seen['x-identity-assertion'] as string)).toMatchObject({ sub: 'alice', cnf: { 'x5t#S256': pki.thumbprint('bob') } });
    expect(await accessLine(res.headers['x-request-id'])).toMatchObject({ user: 'alice', via: 'basic', certificate: pki.thumbprint('bob') });
  });

  it('a forward-auth question comes over the asking proxy\'s connection: its certificate is never the user, nor proves a bound token', async () => {
    // The front proxy asks over its own connection, which presents a certificate of its own.
    const about = (uri: string, headers: Record<string, string> = {}, as = 'bob') =>
      call('/auth/verify', { as, headers: { 'x-forwarded-method': 'GET', 'x-forwarded-uri': uri, ...headers } });
    const anonymous = await about('/v1/ops');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['x-authenticated-user']).toBeUndefined();
    expect(anonymous.json.code).toBe('missing_credentials');
    const alice = await about('/v1/things', { authorization: basic('alice', 'alice-pw') });
    expect(alice.status).toBe(200);
    expect([alice.headers['x-authenticated-user'], alice.headers['x-authenticated-via']]).toEqual(['alice', 'basic']);
    expect(jwtPayload(alice.headers['x-identity-assertion'] as string)).not.toHaveProperty('cnf');
    // A token bound to alice's certificate: the proxy's connection cannot prove it, even one with that certificate.
    const created = await call('/v1/tokens/create', { as: 'alice', body: { appKey: 'alice', appSecret: 'alice-pw' } });
    const bound = await about('/v1/things', { authorization: `Bearer ${(created.json as { accessToken: string }).accessToken}` }, 'alice');
    expect(bound.status).toBe(401);
    expect(bound.json.code).toBe('invalid_token');
  });

  it('a token pair created over certificate A is bound to it: accepted with A only; its refresh token too', async () => {
    const created = await call('/v1/tokens/create', { as: 'alice', body: { appKey: 'alice', appSecret: 'alice-pw' } });
    expect(created.status).toBe(200);
    const { accessToken, refreshToken } = created.json as { accessToken: string; refreshToken: string };
    expect(jwtPayload(accessToken).cnf).toEqual({ 'x5t#S256': pki.thumbprint('alice') });
    const bearer = { authorization: `Bearer ${accessToken}` };

    const withA = await call('/v1/things', { as: 'alice', headers: bearer });
    expect(withA.status).toBe(200);
    expect(lastReceived().headers['x-authenticated-via']).toBe('bearer');
    for (const as of ['bob', undefined]) {
      const other = await call('/v1/things', { as, headers: bearer });
      expect(other.status, String(as)).toBe(401);
      expect(other.json.code, String(as)).toBe('invalid_token');
      expect(String(other.headers['www-authenticate']), String(as)).toContain('error="invalid_token"');
    }

    for (const as of ['bob', undefined]) {
      const refused = await call('/v1/tokens/refresh', { as, body: { refreshToken } });
      expect(refused.status, String(as)).toBe(401);
      expect(refused.json.code, String(as)).toBe('invalid_refresh_token');
    }
    // The refusals above rotated nothing: the first refresh with A is an ordinary one.
    const refreshed = await call('/v1/tokens/refresh', { as: 'alice', body: { refreshToken } });
    expect(refreshed.status).toBe(200);
    const next = refreshed.json as { accessToken: string; refreshToken: string };
    expect(jwtPayload(next.accessToken).cnf).toEqual({ 'x5t#S256': pki.thumbprint('alice') });
    expect((await call('/v1/things', { as: 'alice', headers: { authorization: `Bearer ${next.accessToken}` } })).status).toBe(200);
    expect((await call('/v1/things', { as: 'bob', headers: { authorization: `Bearer ${next.accessToken}` } })).status).toBe(401);
    // The successor refresh token is bound too.
    expect((await call('/v1/tokens/refresh', { body: { refreshToken: next.refreshToken } })).status).toBe(401);
    // Revoking needs no certificate (RFC 7009): the session ends.
    expect((await call('/v1/tokens/revoke', { body: { token: next.refreshToken, type: 'REFRESH_TOKEN' } })).status).toBe(200);
    expect((await call('/v1/things', { as: 'alice', headers: { authorization: `Bearer ${next.accessToken}` } })).status).toBe(401);
  });

  it('a token pair created without a certificate stays unbound and works over any certificate or none', async () => {
    const created = await call('/v1/tokens/create', { body: { appKey: 'alice', appSecret: 'alice-pw' } });
    expect(created.status).toBe(200);
    const { accessToken, refreshToken } = created.json as { accessToken: string; refreshToken: string };
    expect(jwtPayload(accessToken)).not.toHaveProperty('cnf');
    for (const as of ['bob', 'alice', undefined]) {
      expect((await call('/v1/things', { as, headers: { authorization: `Bearer ${accessToken}` } })).status, String(as)).toBe(200);
    }
    const refreshed = await call('/v1/tokens/refresh', { as: 'bob', body: { refreshToken } });
    expect(refreshed.status).toBe(200);
    expect(jwtPayload((refreshed.json as { accessToken: string }).accessToken)).not.toHaveProperty('cnf');
  });

  it('a CRL change applies without a restart: to new connections, and to an open keep-alive connection at its next request', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1, ca: readFileSync(pki.ca), ...pki.identity('dave') });
    try {
      const before = await call('/v1/things', { agent });
      expect(before.status).toBe(200);
      expect(lastReceived().headers['x-authenticated-user']).toBe('dave');
      pki.revoke('dave');
      pki.writeCrl();
      await eventually(async () => (await call('/v1/things', { as: 'dave' })).status === 401);
      const fresh = await call('/v1/things', { as: 'dave' });
      expect(fresh.json.detail).toContain('CERT_REVOKED');
      const open = await call('/v1/things', { agent });
      expect(open.localPort).toBe(before.localPort);
      expect(open.status).toBe(401);
      expect(open.json.detail).toContain('CERT_REVOKED');
      // The others are untouched.
      expect((await call('/v1/things', { as: 'alice' })).status).toBe(200);
    } finally {
      agent.destroy();
    }
  });
});

describe('client certificates, server.tls.clientCerts: require', () => {
  let pki: Pki;
  const gw = gatewayFixture({
    before: () => {
      pki = makePki();
    },
    config: (f) => ({
      server: {
        host: '127.0.0.1', port: 0,
        tls: { certFile: pki.serverCert, keyFile: pki.serverKey, clientCa: pki.ca, crlFile: pki.crl, clientCerts: 'require', userFrom: 'san-email' },
      },
      upstreams: { echo: { url: f.echo.url } },
      routes: [{ path: '/v1/things', upstream: 'echo' }],
    }),
    after: () => pki.remove(),
  });
  const call = (path: string, options?: Call) => httpsCall(pki, gw.port, path, options);

  it('a good certificate is served; the user comes from its e-mail subjectAltName', async () => {
    const res = await call('/v1/things', { as: 'alice' });
    expect(res.status).toBe(200);
    expect(gw.echo.received.at(-1)!.headers['x-authenticated-user']).toBe('alice@example.com');
  });

  it('refuses the handshake without a certificate, with one of an unknown CA, and with a revoked one', async () => {
    for (const as of [undefined, 'mallory', 'carol']) {
      await expect(call('/healthz', { as, headers: { authorization: basic('alice', 'alice-pw') } }), String(as)).rejects.toThrow();
    }
    expect(gw.echo.received).toHaveLength(1);
  });
});
