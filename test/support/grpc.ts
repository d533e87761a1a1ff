import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { TestPki } from './tls-pki.js';

/** The test services (see echo.proto), loaded with grpc-js's own loader. */
const definition = protoLoader.loadSync(fileURLToPath(new URL('./echo.proto', import.meta.url)), { keepCase: true, defaults: true });
const loaded = grpc.loadPackageDefinition(definition) as unknown as { test: Record<'Plain' | 'Tls', grpc.ServiceClientConstructor> };
const services = loaded.test;
const health = (grpc.loadPackageDefinition(protoLoader.loadSync(fileURLToPath(new URL('./health.proto', import.meta.url)), { keepCase: true, defaults: true })) as unknown as {
  grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
}).grpc.health.v1.Health;
export type ServiceName = 'Plain' | 'Tls';

export interface Msg { text: string }
interface Count { n: number }

/** A real gRPC server (grpc-js) with both test services: h2c, or h2 with the test CA's certificate. */
export interface GrpcUpstream {
  url: string;
  port: number;
  /** The metadata of every call, in order. */
  seen: grpc.Metadata[];
  close(): Promise<void>;
  /** Ends every connection at once, calls in progress included (an upstream that dies). */
  kill(): void;
  /** What its grpc.health.v1 Check answers (SERVING at first). */
  serving: 'SERVING' | 'NOT_SERVING';
}

/** The test services' calls, each echoing what it got with the user the gateway named. */
function implementation(seen: grpc.Metadata[]): grpc.UntypedServiceImplementation {
  const user = (md: grpc.Metadata) => String(md.get('x-authenticated-user')[0] ?? '');
  return {
    Unary(call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      seen.push(call.metadata);
      cb(null, { text: `${user(call.metadata)}:${call.request.text}` });
    },
    ServerStream(call: grpc.ServerWritableStream<Count, Msg>) {
      seen.push(call.metadata);
      for (let i = 0; i < call.request.n; i++) call.write({ text: `m${i}` });
      call.end();
    },
    ClientStream(call: grpc.ServerReadableStream<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      seen.push(call.metadata);
      const got: string[] = [];
      call.on('data', (m: Msg) => got.push(m.text));
      call.on('end', () => cb(null, { text: got.join(',') }));
    },
    Bidi(call: grpc.ServerDuplexStream<Msg, Msg>) {
      seen.push(call.metadata);
      call.on('data', (m: Msg) => call.write({ text: `echo:${m.text}` }));
      call.on('end', () => call.end());
    },
    Fail(call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      seen.push(call.metadata);
      const trailer = new grpc.Metadata();
      trailer.set('x-detail', 'shelf 4');
      trailer.set('grpc-status-details-bin', Buffer.from([1, 2, 3, 250]));
      cb({ code: grpc.status.NOT_FOUND, details: `no item called ${call.request.text} (100% sure)`, metadata: trailer });
    },
    /** n messages, one every 20 ms (a stream the test kills or times out mid-way). */
    Slow(call: grpc.ServerWritableStream<Count, Msg>) {
      seen.push(call.metadata);
      let i = 0;
      const timer = setInterval(() => {
        if (call.cancelled || i >= call.request.n) {
          clearInterval(timer);
          if (!call.cancelled) call.end();
          return;
        }
        call.write({ text: `s${i++}` });
      }, 20);
    },
  };
}

export async function grpcUpstream(pki?: TestPki): Promise<GrpcUpstream> {
  const server = new grpc.Server();
  const seen: grpc.Metadata[] = [];
  for (const name of ['Plain', 'Tls'] as const) server.addService(services[name].service, implementation(seen));
  const credentials = pki
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(pki.certFile), private_key: readFileSync(pki.keyFile) }])
    : grpc.ServerCredentials.createInsecure();
  const up = { serving: 'SERVING' as GrpcUpstream['serving'] };
  server.addService(health.service, {
    Check(_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) {
      cb(null, { status: up.serving });
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', credentials, (err, p) => (err ? reject(err) : resolve(p))));
  return Object.assign(up, {
    url: `${pki ? 'https' : 'http'}://127.0.0.1:${port}`,
    port,
    seen,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
    kill: () => server.forceShutdown(),
  });
}

/** A client of `service` at host:port: over TLS trusting `ca`, or h2c without one. */
export function grpcClient(service: ServiceName, port: number, ca?: Buffer): grpc.Client {
  const credentials = ca ? grpc.credentials.createSsl(ca) : grpc.credentials.createInsecure();
  return new services[service](`127.0.0.1:${port}`, credentials);
}

/** A unary call as a promise: its answer, or the status error. */
export function unary<T>(client: grpc.Client, method: string, request: unknown, metadata = new grpc.Metadata(), options: grpc.CallOptions = {}): Promise<T> {
  return new Promise((resolve, reject) => {
    const call = (client as unknown as Record<string, (r: unknown, m: grpc.Metadata, o: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: T) => void) => void>)[method]!;
    call.call(client, request, metadata, options, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

/** Metadata with `authorization` set (Bearer or Basic as given). */
export function withAuthorization(value: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set('authorization', value);
  return md;
}

export { grpc };
