import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A throwaway CA and one server certificate for 127.0.0.1/localhost, made with the openssl CLI in a temporary folder. */
export class TestPki {
  readonly dir = mkdtempSync(join(tmpdir(), 'gw-pki-'));
  readonly caFile = join(this.dir, 'ca.pem');
  readonly certFile = join(this.dir, 'server.pem');
  readonly keyFile = join(this.dir, 'server.key');

  constructor() {
    const caKey = join(this.dir, 'ca.key');
    const csr = join(this.dir, 'server.csr');
    const ext = join(this.dir, 'san.ext');
    writeFileSync(ext, 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=auth-gateway test CA', '-keyout', caKey, '-out', this.caFile);
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', this.keyFile, '-out', csr);
    openssl('x509', '-req', '-in', csr, '-CA', this.caFile, '-CAkey', caKey, '-set_serial', '0x01', '-days', '1', '-extfile', ext, '-out', this.certFile);
  }

  get ca(): Buffer {
    return readFileSync(this.caFile);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}
