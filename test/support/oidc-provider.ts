import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomUUID, type JsonWebKey, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The runner, beside this file. */
const RUNNER = fileURLToPath(new URL('./oidc-provider-runner.mjs', import.meta.url));

/** A throwaway CA (openssl CLI) and a certificate for 127.0.0.1 it signed, in a temporary folder. */
export class TestCa {
  readonly dir = mkdtempSync(join(tmpdir(), 'gw-oidc-ca-'));
  readonly caFile = join(this.dir, 'ca.pem');
  readonly certFile = join(this.dir, 'server.pem');
  readonly keyFile = join(this.dir, 'server.key');

  constructor() {
    const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=auth-gateway oidc test CA', '-keyout', join(this.dir, 'ca.key'), '-out', this.caFile);
    writeFileSync(join(this.dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    const csr = join(this.dir, 'server.csr');
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', this.keyFile, '-out', csr);
    openssl('x509', '-req', '-in', csr, '-CA', this.caFile, '-CAkey', join(this.dir, 'ca.key'), '-set_serial', '0x01',
      '-days', '1', '-extfile', join(this.dir, 'san.ext'), '-out', this.certFile);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

type SigningAlg = 'RS256' | 'PS256' | 'ES256' | 'EdDSA';

/** A provider signing key: the private JWK the provider gets, and the key objects the tests forge with. */
export interface SigningKey {
  kid: string;
  jwk: JsonWebKey & { kid: string };
  privateKey: KeyObject;
  publicKey: KeyObject;
}

/** A new signing key of the kind `alg` needs (RSA 2048, P-256, Ed25519), with a random kid. */
export function signingKey(kind: 'rsa' | 'ec' | 'ed25519'): SigningKey {
  const pair = kind === 'rsa'
    ? generateKeyPairSync('rsa', { modulusLength: 2048 })
    : kind === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519');
  const kid = `${kind}-${randomUUID().slice(0, 8)}`;
  return { kid, jwk: { ...pair.privateKey.export({ format: 'jwk' }), kid }, privateKey: pair.privateKey, publicKey: pair.publicKey };
}

export interface ProviderSettings {
  /** Private JWKs; the first of each kind signs. */
  keys: SigningKey[];
  /** Resource indicator → the access tokens issued for it. */
  resources: Record<string, { alg?: SigningAlg; ttl?: number; audience?: string }>;
  clients: Array<Record<string, unknown>>;
  /** Extra claims of client-credentials access tokens, by client id. */
  clientClaims?: Record<string, Record<string, unknown>>;
  /** Claims of accounts (login names at the development form), also put in their access tokens. */
  accounts?: Record<string, Record<string, unknown>>;
  /** A Cache-Control header on the JWK Set's answer. */
  jwksCacheControl?: string;
}

/**
 * node-oidc-provider in a process of its own on loopback HTTPS with a certificate of `ca`. `restart`
 * stops it and starts it again on the same port (same issuer), e.g. with new keys: a key rotation.
 */
export class TestProvider {
  port = 0;
  issuer = '';
  private proc: ChildProcess | undefined;
  private output = '';
  private readonly dir = mkdtempSync(join(tmpdir(), 'gw-oidc-op-'));

  private constructor(readonly ca: TestCa, public settings: ProviderSettings) {}

  static async start(ca: TestCa, settings: ProviderSettings): Promise<TestProvider> {
    const p = new TestProvider(ca, settings);
    await p.spawn();
    return p;
  }

  private async spawn(): Promise<void> {
    const file = join(this.dir, 'settings.json');
    writeFileSync(file, JSON.stringify({
      port: this.port || 0,
      certFile: this.ca.certFile,
      keyFile: this.ca.keyFile,
      caFile: this.ca.caFile,
      jwks: this.settings.keys.map((k) => k.jwk),
      resources: this.settings.resources,
      clients: this.settings.clients,
      clientClaims: this.settings.clientClaims,
      accounts: this.settings.accounts,
      jwksCacheControl: this.settings.jwksCacheControl,
    }));
    this.output = '';
    const proc = spawn(process.execPath, [RUNNER, file], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    proc.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    const deadline = Date.now() + 15_000;
    for (;;) {
      const m = /\{"listening":(\d+),"issuer":"([^"]+)"\}/.exec(this.output);
      if (m) {
        this.port = Number(m[1]);
        this.issuer = m[2]!;
        return;
      }
      if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`oidc-provider exited:\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`oidc-provider did not start:\n${this.output}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Stops the process (the port is free again once this resolves). */
  stop(): Promise<void> {
    const proc = this.proc;
    this.proc = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    });
  }

  /** Stops it and starts it again on the same port with `settings` changed (new keys: a rotation). */
  async restart(change: Partial<ProviderSettings> = {}): Promise<void> {
    await this.stop();
    this.settings = { ...this.settings, ...change };
    await this.spawn();
  }

  /** Starts it again after `stop`, on the same port. */
  async resume(): Promise<void> {
    await this.spawn();
  }

  /** How many times its JWK Set was fetched since this process started. */
  async jwksFetches(): Promise<number> {
    return ((await this.get('/test/jwks-fetches')) as { count: number }).count;
  }

  /** Back-channel logouts the provider sent since this process started: answered 200, and the errors. */
  async backchannelLogouts(): Promise<{ ok: number; error: string[] }> {
    return (await this.get('/test/backchannel')) as { ok: number; error: string[] };
  }

  /** A JWT access token by the client credentials grant for `resource` (RFC 8707 resource indicator). */
  async clientCredentialsToken(clientId: string, secret: string, resource: string): Promise<string> {
    const body = new URLSearchParams({ grant_type: 'client_credentials', resource, scope: 'api' }).toString();
    const res = await httpsCall(`${this.issuer}/token`, this.ca.caFile, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
      },
      body,
    });
    if (res.status !== 200) throw new Error(`token request failed: ${res.status} ${res.body}`);
    return (JSON.parse(res.body) as { access_token: string }).access_token;
  }

  private async get(path: string): Promise<unknown> {
    const res = await httpsCall(`${this.issuer}${path}`, this.ca.caFile, { method: 'GET', headers: {} });
    return JSON.parse(res.body) as unknown;
  }

  /** Everything the process wrote (for a failure message). */
  log(): string {
    return this.output;
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One HTTPS request trusting `caFile`. */
export function httpsCall(url: string, caFile: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method, headers: init.headers, ca: execCa(caFile), timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(init.body);
  });
}

function execCa(file: string): string {
  return readFileSync(file, 'utf8');
}
