import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request, type RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { loggedPort, startNode } from '../support/process.js';

/** A throwaway CA and server certificates from the openssl CLI, in a temporary folder. */
class Pki {
  readonly dir = mkdtempSync(join(tmpdir(), 'gw-tls-'));
  readonly ca = join(this.dir, 'ca.pem');
  private serial = 1;
  constructor() {
    this.openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=auth-gateway test CA', '-keyout', join(this.dir, 'ca.key'), '-out', this.ca);
    writeFileSync(join(this.dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  }

  /** Writes a new certificate and key for 127.0.0.1 to `cert`/`key`; returns its serial number (hex, upper case). */
  issue(cert: string, key: string): string {
    const serial = (this.serial++).toString(16).toUpperCase().padStart(2, '0');
    const csr = join(this.dir, 'server.csr');
    this.openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', key, '-out', csr);
    this.openssl('x509', '-req', '-in', csr, '-CA', this.ca, '-CAkey', join(this.dir, 'ca.key'), '-set_serial', `0x${serial}`,
      '-days', '1', '-extfile', join(this.dir, 'san.ext'), '-out', cert);
    return serial;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private openssl(...args: string[]): void {
    execFileSync('openssl', args, { stdio: 'ignore' });
  }
}

let pki: Pki;
let certFile: string;
let keyFile: string;
let firstSerial: string;

const gw = gatewayFixture({
  echo: false,
  log: 'info',
  before: () => {
    pki = new Pki();
    certFile = join(pki.dir, 'server.pem');
    keyFile = join(pki.dir, 'server.key');
    firstSerial = pki.issue(certFile, keyFile);
  },
  config: () => ({ server: { host: '127.0.0.1', port: 0, tls: { certFile, keyFile, reloadIntervalMs: 100 } } }),
  after: () => pki.remove(),
});

interface Answer {
  status: number;
  body: string;
  serial: string;
  protocol: string | null;
}

/** One HTTPS request that trusts only the test CA; resolves with what the server presented too. */
function https(path: string, options: RequestOptions = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: gw.port, path, ca: readCa(), agent: false, ...options }, (res) => {
      const socket = res.socket as TLSSocket;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: text, serial: socket.getPeerCertificate().serialNumber, protocol: socket.getProtocol() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
const readCa = () => readFileSync(pki.ca);

/** openssl s_client against the gateway (asynchronously: the gateway answers from this process); stdin closed at once. */
function sClient(...args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('openssl', ['s_client', '-connect', `127.0.0.1:${gw.port}`, '-CAfile', pki.ca, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    const timer = setTimeout(() => child.kill(), 10_000);
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout });
    });
    child.stdin.end();
  });
}

describe('HTTPS on the public port', () => {
  it('serves the API over TLS 1.2 or newer with the configured certificate', async () => {
    const health = await https('/healthz');
    expect(health.status).toBe(200);
    expect(health.serial).toBe(firstSerial);
    expect(['TLSv1.2', 'TLSv1.3']).toContain(health.protocol);
    const created = await https('/v1/tokens/create', { method: 'POST', headers: { 'content-type': 'application/json' } }, JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }));
    expect(created.status).toBe(200);
    expect(JSON.parse(created.body)).toHaveProperty('accessToken');
  });

  it('refuses TLS 1.1', async () => {
    await expect(https('/healthz', { minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' })).rejects.toThrow();
  });

  it('offers TLS 1.2 only ECDHE with AES-GCM or ChaCha20-Poly1305: CBC and SHA-1 suites fail the handshake', async () => {
    for (const cipher of ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-ECDSA-AES128-SHA256', 'ECDHE-RSA-AES128-SHA', 'AES128-SHA']) {
      const refused = await sClient('-tls1_2', '-cipher', cipher);
      expect(refused.stdout, cipher).not.toMatch(/Cipher is [A-Z]/);
      expect(refused.code, cipher).not.toBe(0);
    }
    for (const cipher of ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305']) {
      const accepted = await sClient('-tls1_2', '-cipher', cipher);
      expect(accepted.stdout, cipher).toContain(`Cipher is ${cipher}`);
    }
    // TLS 1.3 keeps Node's suites.
    expect((await sClient('-tls1_3')).stdout).toMatch(/New, TLSv1\.3, Cipher is TLS_AES_256_GCM_SHA384/);
  });

  it('answers plain HTTP on the TLS port with a 400 problem saying so (as nginx does), and still serves TLS after it', async () => {
    for (const body of [undefined, JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' })]) {
      const res = await fetch(`http://127.0.0.1:${gw.port}/${body ? 'v1/tokens/create' : 'healthz'}`, body ? { method: 'POST', body, headers: { 'content-type': 'application/json' } } : {});
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(await res.json()).toMatchObject({ status: 400, code: 'invalid_request', detail: 'The plain HTTP request was sent to HTTPS port: use https://' });
    }
    // curl, as a person would try it.
    // Asynchronously: the gateway answers from this process.
    const curl = await promisify(execFile)('curl', ['-s', '-w', '\\n%{http_code}', `http://127.0.0.1:${gw.port}/healthz`], { encoding: 'utf8', timeout: 10_000 });
    expect(curl.stdout).toMatch(/plain HTTP request was sent to HTTPS port.*\n400$/s);
    expect((await https('/healthz')).status).toBe(200);
  });

  it('picks up a renewed certificate without a restart, and keeps the one in use when the new pair is broken', async () => {
    const renewed = pki.issue(certFile, keyFile);
    await expect.poll(async () => (await https('/healthz')).serial, { timeout: 5000, interval: 100 }).toBe(renewed);
    expect(gw.logs.some((l) => l.includes('"msg":"tls certificate reloaded"'))).toBe(true);
    const failing = async () => (await gw.gateway.metrics.tlsReloadFailing.get()).values[0]?.value;
    expect(await failing()).toBe(0);

    // A key that does not belong to the certificate: logged, and the renewed pair stays in force.
    const otherCert = join(pki.dir, 'other.pem');
    pki.issue(otherCert, keyFile);
    await expect.poll(() => gw.logs.some((l) => l.includes('"msg":"tls certificate not reloaded; keeping the one in use"')), { timeout: 5000, interval: 100 }).toBe(true);
    const after = await https('/healthz');
    expect(after.status).toBe(200);
    expect(after.serial).toBe(renewed);
    // The auth_gateway_tls_reload_failing gauge says so until a reload succeeds.
    expect(await failing()).toBe(1);
    pki.issue(certFile, keyFile);
    await expect.poll(failing, { timeout: 5000, interval: 100 }).toBe(0);
  });
});

describe('HTTPS from the command line', () => {
  it('the built gateway serves HTTPS from a YAML server.tls, and curl with the CA gets an answer', async () => {
    const file = join(pki.dir, 'gateway.yaml');
    writeFileSync(file, [
      `server: { host: 127.0.0.1, port: 0, tls: { certFile: server.pem, keyFile: server.key } }`,
      `users: { htpasswd: ${gw.users.file}, watch: false }`,
      'tokens: { signing: { alg: HS256, secret: "${GATEWAY_JWT_SECRET}" } }',
      'admin: false',
      '',
    ].join('\n'));
    // The last test left a mismatched pair behind: issue a good one for this process.
    pki.issue(certFile, keyFile);
    const child = startNode(join(import.meta.dirname, '../../dist/src/main.js'), ['serve', '--config', file], { GATEWAY_JWT_SECRET: 'x'.repeat(40) });
    try {
      const port = await loggedPort(child);
      const curl = () => spawnSync('curl', ['-sS', '--cacert', pki.ca, `https://127.0.0.1:${port}/healthz`], { encoding: 'utf8', timeout: 5000 });
      await expect.poll(() => curl().stdout, { timeout: 10_000, interval: 100 }).toBe('{"status":"ok"}');
      expect(spawnSync('curl', ['-sS', `https://127.0.0.1:${port}/healthz`], { encoding: 'utf8', timeout: 5000 }).status).not.toBe(0);
      // spawnSync blocks this process: let it read what the child wrote meanwhile.
      await expect.poll(() => child.output(), { timeout: 2000 }).toMatch(/"tls":true.*"msg":"auth-gateway listening"/);
    } finally {
      await child.stop();
    }
  });
});
