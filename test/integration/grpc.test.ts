import { execFile } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { gatewayFixture } from '../support/fixtures.js';
import { grpc, grpcClient, grpcUpstream, unary, withAuthorization, type GrpcUpstream, type Msg, type ServiceName } from '../support/grpc.js';
import { TestPki } from '../support/tls-pki.js';

let pki: TestPki;
let plain: GrpcUpstream;
let tls: GrpcUpstream;

const gw = gatewayFixture({
  before: async () => {
    pki = new TestPki();
    plain = await grpcUpstream();
    tls = await grpcUpstream(pki);
  },
  config: () => ({
    server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, tls: { certFile: pki.certFile, keyFile: pki.keyFile } },
    upstreams: {
      plain: { url: plain.url, protocol: 'h2c', maxConnections: 16, maxQueued: 64 },
      tls: { url: tls.url, protocol: 'h2', caFile: pki.caFile },
    },
    routes: [{ path: '/test.Plain', upstream: 'plain' }, { path: '/test.Tls', upstream: 'tls' }],
  }),
  after: async () => {
    await plain.close();
    await tls.close();
    pki.remove();
  },
});

/** A Bearer token for alice, made over the gateway's TLS listener. */
function bearer(): Promise<string> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' });
    const req = httpsRequest({ host: '127.0.0.1', port: gw.port, method: 'POST', path: '/v1/tokens/create', ca: pki.ca, agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve(`Bearer ${(JSON.parse(text) as { accessToken: string }).accessToken}`));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe.each<[ServiceName, string]>([['Plain', 'an h2c upstream'], ['Tls', 'an h2 upstream (test CA)']])('a grpc-js client through the TLS listener to %s (%s)', (service) => {
  const client = () => grpcClient(service, gw.port, pki.ca);

  it('a unary call with Bearer metadata: the server sees x-authenticated-user', async () => {
    const c = client();
    const answer = await unary<Msg>(c, 'Unary', { text: 'hi' }, withAuthorization(await bearer()));
    expect(answer.text).toBe('alice:hi');
    c.close();
  });

  it('a server-streaming call of 1,000 messages', async () => {
    const c = client();
    const call = (c as unknown as { ServerStream: (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<Msg> }).ServerStream({ n: 1000 }, withAuthorization(await bearer()));
    const got: string[] = [];
    call.on('data', (m: Msg) => got.push(m.text));
    const status = await new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    expect(status.code).toBe(grpc.status.OK);
    expect(got).toHaveLength(1000);
    expect(got[999]).toBe('m999');
    c.close();
  });

  it('a client-streaming call', async () => {
    const c = client();
    const answer = await new Promise<Msg>((resolve, reject) => {
      const call = (c as unknown as { ClientStream: (m: grpc.Metadata, cb: (e: grpc.ServiceError | null, r: Msg) => void) => grpc.ClientWritableStream<Msg> })
        .ClientStream(withAuthorization('Basic ' + Buffer.from('alice:alice-pw').toString('base64')), (err, res) => (err ? reject(err) : resolve(res)));
      for (const text of ['a', 'b', 'c']) call.write({ text });
      call.end();
    });
    expect(answer.text).toBe('a,b,c');
    c.close();
  });

  it('a bidirectional call: each message answered as it is sent', async () => {
    const c = client();
    const call = (c as unknown as { Bidi: (m: grpc.Metadata) => grpc.ClientDuplexStream<Msg, Msg> }).Bidi(withAuthorization(await bearer()));
    const got: string[] = [];
    for (const text of ['one', 'two', 'three']) {
      const next = new Promise<Msg>((resolve) => call.once('data', resolve));
      call.write({ text });
      got.push((await next).text);
    }
    call.end();
    await new Promise((resolve) => call.on('status', resolve));
    expect(got).toEqual(['echo:one', 'echo:two', 'echo:three']);
    c.close();
  });

  it('the upstream\'s NOT_FOUND, its message and trailer metadata reach the client as sent', async () => {
    const c = client();
    const err = await unary<Msg>(c, 'Fail', { text: 'x' }, withAuthorization(await bearer())).then(() => undefined, (e: grpc.ServiceError) => e);
    expect(err?.code).toBe(grpc.status.NOT_FOUND);
    expect(err?.details).toBe('no item called x (100% sure)');
    expect(err?.metadata.get('x-detail')).toEqual(['shelf 4']);
    expect(err?.metadata.get('grpc-status-details-bin')).toEqual([Buffer.from([1, 2, 3, 250])]);
    c.close();
  });
});

const run = promisify(execFile);
const PY_CLIENT = fileURLToPath(new URL('../support/grpcio-client.py', import.meta.url));

/** One unary call by python grpcio (Debian's), through the gateway's TLS listener. */
async function grpcio(method: string, authorization: string, text: string): Promise<Record<string, unknown>> {
  const { stdout } = await run('/usr/bin/python3', [PY_CLIENT, `localhost:${gw.port}`, pki.caFile, authorization, method, text], { timeout: 30_000 });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe('a python grpcio client (the one that met 502 before) through the TLS listener', () => {
  it('a unary call with Bearer metadata to the h2c upstream: the server sees x-authenticated-user', async () => {
    expect(await grpcio('/test.Plain/Unary', await bearer(), 'py')).toEqual({ text: 'alice:py' });
  });

  it('the h2 upstream\'s NOT_FOUND, message and trailer metadata, as sent', async () => {
    const out = await grpcio('/test.Tls/Fail', await bearer(), 'y');
    expect(out).toMatchObject({ code: 'NOT_FOUND', details: 'no item called y (100% sure)' });
    expect(out.trailing).toMatchObject({ 'x-detail': 'shelf 4', 'grpc-status-details-bin': '010203fa' });
  });

  it('a gateway refusal: UNAUTHENTICATED with the gateway\'s reason', async () => {
    const out = await grpcio('/test.Plain/Unary', '-', 'z');
    expect(out.code).toBe('UNAUTHENTICATED');
    expect(String(out.details)).toMatch(/credentials/i);
  });
});
