import { execFileSync } from 'node:child_process';
import { X509Certificate, createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway PKI from the openssl CLI: the clients' CA (which also signs the gateway's certificate),
 * client certificates with CN, OU and subjectAltName, an `openssl ca` database to revoke them, and the
 * CRL the gateway reads; plus a foreign CA's client certificate.
 */
export class Pki {
  readonly dir = mkdtempSync(join(tmpdir(), 'gw-mtls-'));
  readonly ca = this.path('ca.pem');
  readonly crl = this.path('clients.crl');
  readonly serverCert = this.path('server.pem');
  readonly serverKey = this.path('server.key');

  constructor() {
    writeFileSync(this.path('ca.cnf'), [
      '[ ca ]', 'default_ca = clients', '[ clients ]', `database = ${this.path('index.txt')}`,
      `crlnumber = ${this.path('crlnumber')}`, 'default_md = sha256', 'default_crl_days = 1', '',
    ].join('\n'));
    writeFileSync(this.path('index.txt'), '');
    writeFileSync(this.path('crlnumber'), '01\n');
    this.newCa('ca', 'auth-gateway clients CA');
    this.newCa('foreign', 'someone else\'s CA');
    this.sign('ca', 'server', '/CN=127.0.0.1', 'subjectAltName=IP:127.0.0.1', '01');
  }

  /** A client certificate `<name>.pem`/`<name>.key` signed by `ca` (default: the clients' CA). */
  client(name: string, subject: string, san: string, serial: string, ca = 'ca'): void {
    this.sign(ca, name, subject, `subjectAltName=${san}\nextendedKeyUsage=clientAuth`, serial);
  }

  revoke(name: string): void {
    this.openssl('ca', '-config', this.path('ca.cnf'), '-revoke', this.path(`${name}.pem`), '-keyfile', this.path('ca.key'), '-cert', this.ca);
  }

  /** Writes the CRL of what is revoked now, in one step (a rename), as a CRL updater would. */
  writeCrl(): void {
    const next = this.path('next.crl');
    this.openssl('ca', '-config', this.path('ca.cnf'), '-gencrl', '-keyfile', this.path('ca.key'), '-cert', this.ca, '-out', next);
    renameSync(next, this.crl);
  }

  /** The client options of a certificate: its PEM and key. */
  identity(name: string): { cert: Buffer; key: Buffer } {
    return { cert: readFileSync(this.path(`${name}.pem`)), key: readFileSync(this.path(`${name}.key`)) };
  }

  /** RFC 8705 x5t#S256 of a certificate: base64url SHA-256 of its DER. */
  thumbprint(name: string): string {
    return createHash('sha256').update(new X509Certificate(readFileSync(this.path(`${name}.pem`))).raw).digest('base64url');
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  path(file: string): string {
    return join(this.dir, file);
  }

  private newCa(name: string, cn: string): void {
    this.openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
      '-subj', `/CN=${cn}`, '-keyout', this.path(`${name}.key`), '-out', this.path(`${name}.pem`));
  }

  private sign(ca: string, name: string, subject: string, extensions: string, serial: string): void {
    writeFileSync(this.path(`${name}.ext`), `${extensions}\n`);
    this.openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', subject,
      '-keyout', this.path(`${name}.key`), '-out', this.path(`${name}.csr`));
    this.openssl('x509', '-req', '-in', this.path(`${name}.csr`), '-CA', this.path(`${ca}.pem`), '-CAkey', this.path(`${ca}.key`),
      '-set_serial', `0x${serial}`, '-days', '1', '-extfile', this.path(`${name}.ext`), '-out', this.path(`${name}.pem`));
  }

  private openssl(...args: string[]): void {
    execFileSync('openssl', args, { stdio: 'ignore' });
  }
}

/** Who the test PKI issues for: `alice` (ops, dev) and `bob` (sales) are good; `carol` is revoked from the start; `dave` later; `mallory` is from a foreign CA. */
export function makePki(): Pki {
  const pki = new Pki();
  pki.client('alice', '/O=Example/OU=ops/OU=dev/CN=alice', 'email:alice@example.com,URI:spiffe://example/alice,DNS:alice.example', '10');
  pki.client('bob', '/O=Example/OU=sales/CN=bob', 'email:bob@example.com', '11');
  pki.client('carol', '/OU=ops/CN=carol', 'email:carol@example.com', '12');
  pki.client('dave', '/OU=ops/CN=dave', 'email:dave@example.com', '13');
  pki.client('mallory', '/OU=ops/CN=alice', 'email:alice@example.com', '10', 'foreign');
  pki.revoke('carol');
  pki.writeCrl();
  return pki;
}
