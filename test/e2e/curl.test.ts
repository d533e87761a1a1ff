import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { startNginx, type Nginx } from './support/nginx.js';
import { requireTool, run } from './support/tools.js';

/**
 * curl against the gateway, with nginx as the upstream (static files with ranges and gzip, PUT uploads):
 * the options people actually use, each checked on the bytes that arrive.
 */

let work: string;
let www: string;
let upstream: Nginx;
let curl: string;
const data = randomBytes(300 * 1024);
const text = Array.from({ length: 4000 }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog\n`).join('');

const gw = gatewayFixture({
  echo: false,
  setupTimeoutMs: 30_000,
  before: async () => {
    curl = requireTool('curl');
    work = mkdtempSync(join(tmpdir(), 'gw-e2e-curl-'));
    www = join(work, 'www');
    mkdirSync(join(www, 'files', 'uploads'), { recursive: true });
    writeFileSync(join(www, 'files', 'data.bin'), data);
    writeFileSync(join(www, 'files', 'text.txt'), text);
    upstream = await startNginx((port) => `
    server {
      listen 127.0.0.1:${port};
      root ${www};
      client_max_body_size 0;
      gzip on;
      gzip_types text/plain;
      gzip_min_length 100;
      location /files/uploads/ {
        dav_methods PUT;
        create_full_put_path on;
      }
    }`);
  },
  config: () => ({
    upstreams: { files: { url: `http://127.0.0.1:${upstream.port}` } },
    routes: [{ path: '/files', upstream: 'files' }],
  }),
  after: async () => {
    await upstream?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  },
});

const url = (path: string) => `http://127.0.0.1:${gw.port}${path}`;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const AUTH = ['-u', 'alice:alice-pw'];

/** curl with -sS and -v (the exchange, on stderr); the body to a file. */
async function fetchWithCurl(args: string[], out = join(work, `out-${randomBytes(4).toString('hex')}`)) {
  const r = await run(curl, ['-sS', '-v', '-o', out, '-w', '%{http_code}', ...args]);
  if (r.code !== 0) throw new Error(`curl exit ${r.code}\n${r.stderr}`);
  let body = Buffer.alloc(0);
  try {
    body = readFileSync(out);
  } catch {
    // no body written
  }
  return { status: Number(r.stdout), verbose: r.stderr, body, out };
}

/** The lines curl sent (`> `) and received (`< `), without the CR. */
const sentLines = (v: string) => v.split('\n').filter((l) => l.startsWith('> ')).map((l) => l.slice(2).trimEnd());
const receivedLines = (v: string) => v.split('\n').filter((l) => l.startsWith('< ')).map((l) => l.slice(2).trimEnd());

describe('curl through the gateway', () => {
  it('--anyauth: asks without credentials, reads the challenge, then sends Basic', async () => {
    const r = await fetchWithCurl(['--anyauth', ...AUTH, url('/files/data.bin')]);
    expect(r.status).toBe(200);
    expect(sha(r.body)).toBe(sha(data));
    const sent = sentLines(r.verbose);
    const requests = sent.filter((l) => l.startsWith('GET '));
    expect(requests).toHaveLength(2);
    expect(sent.filter((l) => /^Authorization: Basic /.test(l))).toHaveLength(1);
    const received = receivedLines(r.verbose);
    expect(received).toContain('HTTP/1.1 401 Unauthorized');
    expect(received.some((l) => /^WWW-Authenticate: Basic realm="auth-gateway"/i.test(l))).toBe(true);
  });

  it('Expect: 100-continue: the upload gets its 100 Continue and arrives whole', async () => {
    const file = join(work, 'upload.bin');
    const payload = randomBytes(2 * 1024 * 1024);
    writeFileSync(file, payload);
    const started = Date.now();
    const r = await fetchWithCurl([...AUTH, '-H', 'Expect: 100-continue', '-T', file, url('/files/uploads/up.bin')]);
    expect(r.status).toBe(201);
    expect(sentLines(r.verbose)).toContain('Expect: 100-continue');
    expect(receivedLines(r.verbose)).toContain('HTTP/1.1 100 Continue');
    // curl waits 1 s for a 100 before sending anyway: the answer came before that.
    expect(Date.now() - started).toBeLessThan(1000);
    expect(sha(readFileSync(join(www, 'files', 'uploads', 'up.bin')))).toBe(sha(payload));
  });

  it('-0 (HTTP/1.0): a gzip body the upstream sent chunked reaches the 1.0 client unchunked and whole', async () => {
    const r = await fetchWithCurl(['-0', '--compressed', ...AUTH, url('/files/text.txt')]);
    expect(r.status).toBe(200);
    expect(sentLines(r.verbose)).toContain('GET /files/text.txt HTTP/1.0');
    const received = receivedLines(r.verbose).map((l) => l.toLowerCase());
    expect(received).toContain('content-encoding: gzip');
    expect(received.some((l) => l.startsWith('transfer-encoding'))).toBe(false);
    expect(r.body.toString('utf8')).toBe(text);
  });

  it('-0 with Connection: keep-alive keeps the connection for the next request (forwarded responses too)', async () => {
    // Two gateway answers and two forwarded ones on one command line: curl reuses the connection
    // only when each response said keep-alive and was framed by Content-Length.
    const r = await run(curl, ['-sS', '-v', '-0', '-H', 'Connection: keep-alive', ...AUTH,
      '-o', '/dev/null', url('/healthz'), '-o', '/dev/null', url('/healthz'),
      '-o', '/dev/null', url('/files/data.bin'), '-o', '/dev/null', url('/files/data.bin')]);
    expect(r.code, r.stderr).toBe(0);
    const connects = r.stderr.split('\n').filter((l) => /Connected to 127\.0\.0\.1/.test(l));
    const reuses = r.stderr.split('\n').filter((l) => /Re-using existing connection/.test(l));
    expect({ connects: connects.length, reuses: reuses.length }).toEqual({ connects: 1, reuses: 3 });
  });

  it('-r: a byte range comes back as 206 with exactly those bytes', async () => {
    const r = await fetchWithCurl([...AUTH, '-r', '1000-1999', url('/files/data.bin')]);
    expect(r.status).toBe(206);
    expect(receivedLines(r.verbose).map((l) => l.toLowerCase())).toContain(`content-range: bytes 1000-1999/${data.length}`);
    expect(r.body.equals(data.subarray(1000, 2000))).toBe(true);
    const tail = await fetchWithCurl([...AUTH, '-r', '-500', url('/files/data.bin')]);
    expect(tail.status).toBe(206);
    expect(tail.body.equals(data.subarray(data.length - 500))).toBe(true);
  });

  it('-C -: resumes a partial download where the file ends', async () => {
    const out = join(work, 'resumed.bin');
    writeFileSync(out, data.subarray(0, 123_456));
    const r = await fetchWithCurl([...AUTH, '-C', '-', url('/files/data.bin')], out);
    expect(r.status).toBe(206);
    expect(sentLines(r.verbose)).toContain('Range: bytes=123456-');
    expect(sha(r.body)).toBe(sha(data));
  });

  it('--compressed: gzip passes through and curl decodes it to the original', async () => {
    const r = await fetchWithCurl(['--compressed', ...AUTH, url('/files/text.txt')]);
    expect(r.status).toBe(200);
    expect(sentLines(r.verbose).some((l) => /^Accept-Encoding: .*gzip/.test(l))).toBe(true);
    expect(receivedLines(r.verbose).map((l) => l.toLowerCase())).toContain('content-encoding: gzip');
    expect(r.body.toString('utf8')).toBe(text);
  });

  it('--http2 on plain http (an h2c upgrade offer) is answered in HTTP/1.1, as if no upgrade was offered', async () => {
    const r = await fetchWithCurl(['--http2', ...AUTH, url('/files/data.bin')]);
    expect(r.status).toBe(200);
    expect(sentLines(r.verbose).some((l) => /^Upgrade: h2c/i.test(l))).toBe(true);
    expect(receivedLines(r.verbose)[0]).toBe('HTTP/1.1 200 OK');
    expect(sha(r.body)).toBe(sha(data));
  });
});
