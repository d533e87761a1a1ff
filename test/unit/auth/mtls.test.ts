import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certificateId, revokedIds, subjectAltNames, thumbprintOf } from '../../../src/auth/peer-certificates.js';
import { parseRefreshToken, refreshTokenFor } from '../../../src/tokens/refresh-token.js';
import { noGroups } from '../../../src/authz/groups.js';
import type { Principal } from '../../../src/core/principal.js';
import { stillAllowed } from '../../../src/pipeline/steps/allow.js';
import { RouteTable } from '../../../src/routes/route-table.js';
import { testConfig } from '../../support/fixtures.js';

/** Certificates and CRLs from the openssl CLI, read by the gateway's own DER reader. */
describe('client certificates: the CRL and certificate reader', () => {
  let dir: string;
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-mtls-unit-'));
    writeFileSync(join(dir, 'ca.cnf'), '[ ca ]\ndefault_ca = t\n[ t ]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha256\ndefault_crl_days = 1\n');
    writeFileSync(join(dir, 'index.txt'), '');
    writeFileSync(join(dir, 'crlnumber'), '01\n');
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/O=Test/CN=unit CA', '-keyout', 'ca.key', '-out', 'ca.pem');
    openssl('ca', '-config', 'ca.cnf', '-gencrl', '-keyfile', 'ca.key', '-cert', 'ca.pem', '-out', 'empty.crl');
    // Serials with a leading zero byte and a high bit (00 80 …), and a long one.
    for (const [name, serial] of [['a', '0x80'], ['b', '0x0102030405060708090a0b0c0d0e0f1011'], ['c', '0x7f']] as const) {
      openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`);
      openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', serial, '-days', '1', '-out', `${name}.pem`);
    }
    openssl('ca', '-config', 'ca.cnf', '-revoke', 'a.pem', '-keyfile', 'ca.key', '-cert', 'ca.pem');
    openssl('ca', '-config', 'ca.cnf', '-revoke', 'b.pem', '-keyfile', 'ca.key', '-cert', 'ca.pem');
    openssl('ca', '-config', 'ca.cnf', '-gencrl', '-keyfile', 'ca.key', '-cert', 'ca.pem', '-out', 'two.crl');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const der = (name: string) => new X509Certificate(readFileSync(join(dir, `${name}.pem`))).raw;

  it('names a certificate by issuer and serial as a CRL does', () => {
    const revoked = revokedIds(readFileSync(join(dir, 'two.crl')));
    expect(revoked.size).toBe(2);
    expect(revoked.has(certificateId(der('a'))!)).toBe(true);
    expect(revoked.has(certificateId(der('b'))!)).toBe(true);
    expect(revoked.has(certificateId(der('c'))!)).toBe(false);
    expect(certificateId(der('a'))).toMatch(/\/80$/);
    expect(certificateId(der('b'))).toMatch(/\/0102030405060708090A0B0C0D0E0F1011$/);
  });

  it('reads a CRL without entries, and several CRLs in one file', () => {
    const empty = readFileSync(join(dir, 'empty.crl'), 'latin1');
    expect(revokedIds(empty).size).toBe(0);
    expect(revokedIds(empty + readFileSync(join(dir, 'two.crl'), 'latin1')).size).toBe(2);
  });

  it('refuses a file with no CRL or a broken one', () => {
    expect(() => revokedIds(readFileSync(join(dir, 'ca.pem')))).toThrow();
    expect(() => revokedIds('-----BEGIN X509 CRL-----\nMAMCAQE=\n-----END X509 CRL-----\n')).toThrow();
    expect(certificateId(Buffer.from([0x30, 0x82, 0xff]))).toBeUndefined();
  });

  it('the thumbprint is the base64url SHA-256 of the DER (RFC 8705 x5t#S256)', () => {
    const cert = new X509Certificate(readFileSync(join(dir, 'c.pem')));
    expect(thumbprintOf(cert.raw)).toBe(Buffer.from(cert.fingerprint256.replaceAll(':', ''), 'hex').toString('base64url'));
  });
});

describe('client certificates: subjectAltName as Node writes it', () => {
  it('splits e-mails, URIs and DNS names, quoted values included', () => {
    expect(subjectAltNames('DNS:a.example, email:a@example.com, URI:spiffe://x/a, IP Address:127.0.0.1, DNS:b.example')).toEqual({
      email: ['a@example.com'], uri: ['spiffe://x/a'], dns: ['a.example', 'b.example'],
    });
    expect(subjectAltNames('email:"a, b@example.com", DNS:c.example')).toEqual({ email: ['a, b@example.com'], uri: [], dns: ['c.example'] });
    expect(subjectAltNames('')).toEqual({ email: [], uri: [], dns: [] });
  });
});

describe('bound refresh tokens', () => {
  const key = Buffer.alloc(32, 7);
  const sid = 'AAAAAAAAAAAAAAAAAAAAAA';
  const x5t = 'bfgrZeeqzPHfX65IZLZv8rAjYHUavp4xSfihuRUg0pI';
  const other = 'FyYc1NQECIyj1b29JnAcueUuGClZsS9Uw67ulppyH_Y';

  it('carry the thumbprint under their MAC: it cannot be removed or swapped', () => {
    const bound = refreshTokenFor(key, sid, 3, x5t).token;
    expect(parseRefreshToken(key, bound)).toMatchObject({ sid, generation: 3, thumbprint: x5t });
    const stripped = bound.slice(0, bound.lastIndexOf('.'));
    expect(parseRefreshToken(key, stripped)).toBeUndefined();
    expect(parseRefreshToken(key, `${stripped}.${other}`)).toBeUndefined();
  });

  it('unbound ones are as before', () => {
    const unbound = refreshTokenFor(key, sid, 0).token;
    expect(unbound.split('.')).toHaveLength(2);
    expect(parseRefreshToken(key, unbound)).toMatchObject({ sid, generation: 0, thumbprint: undefined });
    expect(parseRefreshToken(key, `${unbound}.${x5t}`)).toBeUndefined();
  });
});

describe('an open tunnel of a certificate principal', () => {
  it('is judged again by the certificate\'s groups, not by the groups file', () => {
    const config = testConfig('/nonexistent', {
      server: { tls: { certFile: 'c.pem', keyFile: 'k.pem', clientCa: 'ca.pem' } },
      upstreams: { live: { url: 'http://127.0.0.1:9' } },
      routes: [{ path: '/live', upstream: 'live', websocket: true, allow: { groups: ['ops'] } }],
    });
    const routes = new RouteTable(config.routes, config.upstreams, config.rateLimit);
    const owner = (groups: string[], ownGroups: boolean): Principal => ({
      user: 'alice', via: 'mtls', groups, ownGroups, sid: undefined, expiresAt: undefined, ambient: true, proof: '', credential: undefined,
    });
    expect(stillAllowed(routes, noGroups, owner(['ops'], true), '/live')).toBe(true);
    expect(stillAllowed(routes, noGroups, owner(['sales'], true), '/live')).toBe(false);
    // A principal whose groups came from the file is judged by the file (which has none here).
    expect(stillAllowed(routes, noGroups, owner(['ops'], false), '/live')).toBe(false);
  });
});
