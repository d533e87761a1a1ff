import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect as h2connect, type IncomingHttpHeaders } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import { expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { grpcUpstream, type GrpcUpstream } from '../support/grpc.js';

const BASIC = 'Basic ' + Buffer.from('alice:alice-pw').toString('base64');
const ORIGIN = 'https://app.example';
let plain: GrpcUpstream;
/** The page's own origin (another port): its calls to the gateway are cross-origin. */
let pages: Server;
let pageOrigin: string;

const gw = gatewayFixture({
  before: async () => {
    plain = await grpcUpstream();
    pages = createServer((_req, res) => res.end('<!doctype html><title>grpc-web</title>'));
    await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
    pageOrigin = `http://127.0.0.1:${(pages.address() as { port: number }).port}`;
  },
  config: () => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, h2c: true },
    upstreams: { plain: { url: plain.url, protocol: 'h2c' } },
    routes: [{
      path: '/test.Plain', upstream: 'plain',
      cors: { origins: [ORIGIN, pageOrigin], methods: ['POST'], headers: ['authorization', 'content-type', 'x-grpc-web', 'x-user-agent', 'grpc-timeout'] },
    }],
  }),
  after: async () => {
    await plain.close();
    await new Promise<void>((resolve) => pages.close(() => resolve()));
  },
});

/** A length-prefixed gRPC message frame. */
function frame(message: Buffer, flag = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}
/** test.Msg { text } and test.Count { n } in protobuf's wire form (small values only). */
const msg = (text: string) => Buffer.concat([Buffer.from([0x0a, Buffer.byteLength(text)]), Buffer.from(text)]);
const count = (n: number) => Buffer.from(n < 128 ? [0x08, n] : [0x08, (n & 0x7f) | 0x80, n >> 7]);

/** A gRPC-Web body's frames: messages (their text field) and the trailers of the last frame. */
function frames(body: Buffer): { messages: string[]; trailers: Record<string, string> } {
  const messages: string[] = [];
  const trailers: Record<string, string> = {};
  for (let at = 0; at < body.length;) {
    const flag = body[at]!;
    const length = body.readUInt32BE(at + 1);
    const payload = body.subarray(at + 5, at + 5 + length);
    at += 5 + length;
    if (flag & 0x80) {
      for (const line of payload.toString('latin1').split('\r\n').filter(Boolean)) {
        const i = line.indexOf(':');
        trailers[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      }
    } else {
      messages.push(payload.subarray(2, 2 + payload[1]!).toString());
    }
  }
  return { messages, trailers };
}

it('gRPC-Web (binary) over HTTP/1.1 from a plain HTTP client: the answer\'s frames, then the trailers as the last frame', async () => {
  const res = await fetch(`${gw.base}/test.Plain/Unary`, {
    method: 'POST',
    headers: { 'content-type': 'application/grpc-web+proto', 'x-grpc-web': '1', authorization: BASIC, origin: ORIGIN },
    body: frame(msg('hi')),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/grpc-web+proto');
  expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
  expect(res.headers.get('access-control-expose-headers')).toMatch(/grpc-status, grpc-message/);
  const { messages, trailers } = frames(Buffer.from(await res.arrayBuffer()));
  expect(messages).toEqual(['alice:hi']);
  expect(trailers['grpc-status']).toBe('0');
});

it('gRPC-Web text (base64) over HTTP/2: a server-streaming call of 100 messages', async () => {
  const session = h2connect(`http://127.0.0.1:${gw.port}`);
  const stream = session.request({ ':method': 'POST', ':path': '/test.Plain/ServerStream', 'content-type': 'application/grpc-web-text', 'x-grpc-web': '1', authorization: BASIC });
  // Sent in two pieces that split a base64 group.
  const encoded = frame(count(100)).toString('base64');
  stream.write(encoded.slice(0, 3));
  stream.end(encoded.slice(3));
  const headers = await new Promise<IncomingHttpHeaders>((resolve) => stream.on('response', resolve));
  let text = '';
  stream.setEncoding('latin1');
  stream.on('data', (d: string) => (text += d));
  await new Promise((resolve) => stream.on('end', resolve));
  session.close();
  expect(headers['content-type']).toBe('application/grpc-web-text');
  const { messages, trailers } = frames(Buffer.from(text, 'base64'));
  expect(messages).toHaveLength(100);
  expect(messages[99]).toBe('m99');
  expect(trailers['grpc-status']).toBe('0');
});

it('the upstream\'s NOT_FOUND with its message and metadata comes back in the trailer frame', async () => {
  const res = await fetch(`${gw.base}/test.Plain/Fail`, {
    method: 'POST', headers: { 'content-type': 'application/grpc-web', authorization: BASIC }, body: frame(msg('x')),
  });
  expect(res.status).toBe(200);
  // grpc-js answers an error as trailers-only: the status is in the headers, the body empty.
  const body = Buffer.from(await res.arrayBuffer());
  const status = res.headers.get('grpc-status') ?? frames(body).trailers['grpc-status'];
  const message = res.headers.get('grpc-message') ?? frames(body).trailers['grpc-message'];
  expect(status).toBe('5');
  expect(decodeURIComponent(message!)).toBe('no item called x (100% sure)');
  expect(res.headers.get('x-detail') ?? frames(body).trailers['x-detail']).toBe('shelf 4');
});

it('a gateway refusal of a gRPC-Web call is a gRPC-Web answer (UNAUTHENTICATED), readable cross-origin', async () => {
  const res = await fetch(`${gw.base}/test.Plain/Unary`, {
    method: 'POST', headers: { 'content-type': 'application/grpc-web-text', origin: ORIGIN }, body: frame(msg('hi')).toString('base64'),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/grpc-web-text');
  expect(res.headers.get('grpc-status')).toBe('16');
  expect(res.headers.get('access-control-expose-headers')).toMatch(/grpc-status/);
  expect(await res.text()).toBe('');
});

it('gRPC-Web from headless Chromium: a page posts a frame with fetch (CORS preflight included) and reads the answer and its status', async () => {
  const profile = mkdtempSync(join(tmpdir(), 'gw-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`],
  });
  try {
    const page = await browser.newPage();
    await page.goto(pageOrigin);
    const answer = await page.evaluate(async (url: string, authorization: string) => {
      // test.Msg { text: "browser" } in its 5-byte frame.
      const message = [0x0a, 7, ...new TextEncoder().encode('browser')];
      const body = new Uint8Array([0, 0, 0, 0, message.length, ...message]);
      const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/grpc-web+proto', 'x-grpc-web': '1', authorization } });
      return { status: res.status, type: res.headers.get('content-type'), bytes: Array.from(new Uint8Array(await res.arrayBuffer())) };
    }, `${gw.base}/test.Plain/Unary`, BASIC);
    expect(answer.status).toBe(200);
    expect(answer.type).toBe('application/grpc-web+proto');
    const { messages, trailers } = frames(Buffer.from(answer.bytes));
    expect(messages).toEqual(['alice:browser']);
    expect(trailers['grpc-status']).toBe('0');
    const refused = await page.evaluate(async (url: string) => {
      const res = await fetch(url, { method: 'POST', body: new Uint8Array([0, 0, 0, 0, 0]), headers: { 'content-type': 'application/grpc-web+proto' } });
      return { status: res.status, grpcStatus: res.headers.get('grpc-status') };
    }, `${gw.base}/test.Plain/Unary`);
    // The page reads the gateway's refusal as a gRPC status (exposed to it by CORS).
    expect(refused).toEqual({ status: 200, grpcStatus: '16' });
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
}, 60_000);
