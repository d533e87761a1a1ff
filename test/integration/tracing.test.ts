import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { connect as h2connect, createServer as createH2Server, type Http2Server } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, echoUpstream, htpasswd, startGateway, testConfig, type EchoUpstream, type RunningGateway } from '../support/fixtures.js';
import { createLogger } from '../../src/log.js';
import { closedPort } from '../support/process.js';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const alice = { authorization: basic('alice', 'alice-pw'), 'user-agent': 'tracing-test/1.0' };

let receiver: OtlpReceiver;
let users: ReturnType<typeof htpasswd>;
let echo: EchoUpstream;
let refusing: number;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
  users = htpasswd({ alice: 'alice-pw' });
  echo = await echoUpstream();
  refusing = await closedPort();
});
afterAll(async () => {
  await echo?.close();
  await receiver?.close();
  users?.remove();
});

interface Started {
  gw: RunningGateway;
  logs: string[];
}

/** A gateway with the echo upstream at /v1/items, a refusing one at /v1/gone, the environment and `tracing` given. */
async function gatewayWith(env: Record<string, string>, tracing?: Record<string, unknown>): Promise<Started> {
  const logs: string[] = [];
  const config = testConfig(users.file, {
    upstreams: { up: { url: echo.url }, gone: { url: `http://127.0.0.1:${refusing}` } },
    routes: [{ path: '/v1/items', upstream: 'up' }, { path: '/v1/gone', upstream: 'gone' }],
    log: { level: 'info', access: true },
    ...(tracing ? { tracing } : {}),
  });
  const gw = await startGateway(config, { env, log: createLogger('info', (line) => logs.push(line)) });
  return { gw, logs };
}

/** The spans of one trace once `count` of them arrived (exports are batched: OTEL_BSP_SCHEDULE_DELAY). */
async function spansOf(traceId: string, count: number, complete: (spans: ReceivedSpan[]) => boolean = (all) => all.some((s) => s.kind === SPAN_KIND.SERVER)): Promise<ReceivedSpan[]> {
  // Spans arrive in the exporter's batches, in the order they end (the server span last): wait for all that
  // are asked for (by default: the request's server span, so the spans that ended before it are in).
  const of = () => receiver.spans.filter((s) => s.traceId === traceId);
  await expect.poll(() => of().length >= count && complete(of()), { timeout: 10_000, interval: 50 }).toBe(true);
  return of();
}

/** The upstream's last request with this path. */
const receivedAt = (path: string) => echo.received.filter((r) => r.url === path).at(-1)!;
const parseTraceparent = (value: unknown) => {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0([01])$/.exec(String(value));
  if (!m) throw new Error(`not a traceparent: ${String(value)}`);
  return { traceId: m[1]!, parentId: m[2]!, sampled: m[3] === '1' };
};
const logLines = (logs: string[]) => logs.map((l) => JSON.parse(l) as Record<string, unknown>);

describe.each([
  { protocol: 'http/json', contentType: 'application/json', how: 'the OTEL_* environment' },
  { protocol: 'http/protobuf', contentType: 'application/x-protobuf', how: 'the tracing section' },
])('traces exported over OTLP $protocol (set by $how) to a real receiver', ({ protocol, contentType, how }) => {
  let started: Started;
  beforeAll(async () => {
    const fast = { OTEL_BSP_SCHEDULE_DELAY: '50' };
    started = how === 'the tracing section'
      ? await gatewayWith(fast, { endpoint: receiver.url, protocol, serviceName: 'gw-proto', headers: { 'x-collector-token': 'abc' } })
      : await gatewayWith({ ...fast, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: protocol, OTEL_SERVICE_NAME: 'gw-json', OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-token=abc' },
        // The environment wins over the section.
        { endpoint: 'http://127.0.0.1:1', protocol: 'http/protobuf', serviceName: 'not-this' });
  });
  afterAll(() => started?.gw.close());

  it('continues the trace a request carries: the server span\'s parent is the caller\'s, the upstream\'s traceparent names the client span', async () => {
    const traceId = hex(16);
    const callerSpan = hex(8);
    const path = `/v1/items?n=${traceId}`;
    const res = await fetch(`${started.gw.base}${path}`, { headers: { ...alice, traceparent: `00-${traceId}-${callerSpan}-01`, tracestate: 'vendor=opaque' } });
    expect(res.status).toBe(200);
    const upstream = receivedAt(path);
    const sent = parseTraceparent(upstream.headers.traceparent);
    expect(sent.traceId).toBe(traceId);
    expect(sent.sampled).toBe(true);
    expect(upstream.headers.tracestate).toBe('vendor=opaque');

    // The first Basic request of alice checks her password with bcrypt: a span of its own.
    const spans = await spansOf(traceId, 3, (all) => [SPAN_KIND.SERVER, SPAN_KIND.CLIENT].every((kind) => all.some((s) => s.kind === kind)) && all.some((s) => s.name === 'bcrypt.compare'));
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    const client = spans.find((s) => s.kind === SPAN_KIND.CLIENT)!;
    expect(spans.find((s) => s.name === 'bcrypt.compare')).toMatchObject({ kind: SPAN_KIND.INTERNAL, parentSpanId: server.spanId });
    expect(server.parentSpanId).toBe(callerSpan);
    expect(client.parentSpanId).toBe(server.spanId);
    expect(sent.parentId).toBe(client.spanId);
    expect(server.contentType).toContain(contentType);
    expect(server.resource['service.name']).toBe(how === 'the tracing section' ? 'gw-proto' : 'gw-json');
    expect(receiver.requests.at(-1)!.headers['x-collector-token']).toBe('abc');
    expect(server.name).toBe('GET /v1/items');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'url.path': '/v1/items',
      'http.route': '/v1/items',
      'http.response.status_code': 200,
      'server.address': '127.0.0.1',
      'client.address': '127.0.0.1',
      'network.protocol.version': '1.1',
      'user_agent.original': 'tracing-test/1.0',
      'enduser.id': 'alice',
      'auth_gateway.via': 'basic',
    });
    expect(client.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.response.status_code': 200, 'server.address': '127.0.0.1' });
    // Never the query string (its values can be tokens).
    expect(JSON.stringify(spans)).not.toContain('?n=');
  });

  it('starts a trace for a request without one, and the upstream receives a traceparent of it', async () => {
    const path = `/v1/items?n=${hex(4)}`;
    expect((await fetch(`${started.gw.base}${path}`, { headers: alice })).status).toBe(200);
    const sent = parseTraceparent(receivedAt(path).headers.traceparent);
    const spans = await spansOf(sent.traceId, 2);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    expect(server.parentSpanId).toBe('');
    expect(spans.find((s) => s.kind === SPAN_KIND.CLIENT)!.spanId).toBe(sent.parentId);
  });

  it('gives the store calls a request waits for spans of its trace', async () => {
    const traceId = hex(16);
    const res = await fetch(`${started.gw.base}/v1/tokens/create`, {
      method: 'POST', body: JSON.stringify({ appKey: 'alice', appSecret: 'alice-pw' }),
      headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${hex(8)}-01` },
    });
    expect(res.status).toBe(200);
    await expect.poll(() => receiver.spans.filter((s) => s.traceId === traceId && s.name.startsWith('store.')).length, { timeout: 10_000 }).toBeGreaterThan(0);
    const spans = await spansOf(traceId, 2);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    expect(server.attributes).toMatchObject({ 'url.path': '/v1/tokens/create', 'http.response.status_code': 200, 'enduser.id': 'alice' });
    for (const store of spans.filter((s) => s.name.startsWith('store.'))) expect(store.parentSpanId).toBe(server.spanId);
  });

  it('says on a refused request\'s span why it was refused (its problem code), and the log lines carry its trace', async () => {
    const traceId = hex(16);
    const res = await fetch(`${started.gw.base}/v1/items`, { headers: { traceparent: `00-${traceId}-${hex(8)}-01` } });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'missing_credentials' });
    const [server] = await spansOf(traceId, 1);
    expect(server!.kind).toBe(SPAN_KIND.SERVER);
    expect(server!.attributes).toMatchObject({ 'http.response.status_code': 401, 'auth_gateway.code': 'missing_credentials', 'url.path': '/v1/items' });
    const access = logLines(started.logs).find((l) => l.msg === 'request' && l.trace_id === traceId);
    expect(access).toMatchObject({ status: 401, code: 'missing_credentials', trace_id: traceId, span_id: server!.spanId, protocol: 'h1' });
  });

  it('marks an upstream failure as an error on both spans, and the warning logged for it carries the trace', async () => {
    const traceId = hex(16);
    const res = await fetch(`${started.gw.base}/v1/gone`, { headers: { ...alice, traceparent: `00-${traceId}-${hex(8)}-01` } });
    expect(res.status).toBe(502);
    const spans = await spansOf(traceId, 2);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 502, 'auth_gateway.code': 'bad_gateway', 'error.type': 'bad_gateway' });
    expect(server.statusCode).toBe(2);
    expect(spans.find((s) => s.kind === SPAN_KIND.CLIENT)!.attributes['error.type']).toBe('ECONNREFUSED');
    await expect.poll(() => logLines(started.logs).find((l) => l.msg === 'upstream failed' && l.trace_id === traceId)).toBeDefined();
  });
});

describe('h2c upstreams (the h2 engine)', () => {
  let started: Started;
  let h2: Http2Server;
  let h2Url: string;
  let refusingH2: number;
  const seen: Array<Record<string, unknown>> = [];
  beforeAll(async () => {
    h2 = createH2Server();
    h2.on('stream', (stream, headers) => {
      seen.push(headers);
      stream.on('error', () => {});
      stream.resume();
      stream.on('end', () => {
        if (headers['content-type'] === 'application/grpc') {
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
          stream.end(Buffer.from([0, 0, 0, 0, 0]));
          return;
        }
        stream.respond({ ':status': 200 });
        stream.end('ok');
      });
    });
    await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
    h2Url = `http://127.0.0.1:${(h2.address() as { port: number }).port}`;
    refusingH2 = await closedPort();
    const logs: string[] = [];
    const config = testConfig(users.file, {
      server: { host: '127.0.0.1', port: 0, shutdownGraceMs: 2000, h2c: true },
      upstreams: { h2: { url: h2Url, protocol: 'h2c' }, gone: { url: `http://127.0.0.1:${refusingH2}`, protocol: 'h2c' } },
      routes: [{ path: '/v1/h2', upstream: 'h2' }, { path: '/test.Echo', upstream: 'h2' }, { path: '/v1/gone', upstream: 'gone' }],
      log: { level: 'info', access: true },
    });
    const gw = await startGateway(config, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50' }, log: createLogger('info', (line) => logs.push(line)) });
    started = { gw, logs };
  });
  afterAll(async () => {
    await started?.gw.close();
    await new Promise<void>((resolve) => h2?.close(() => resolve()));
  });
  const lastSeen = (path: string) => seen.filter((h) => h[':path'] === path).at(-1)!;

  it('an HTTP/1.1 request: a CLIENT span of the server span, its traceparent at the upstream, the same attributes as an HTTP/1.1 upstream\'s', async () => {
    const traceId = hex(16);
    const path = `/v1/h2/items?n=${traceId}`;
    const res = await fetch(`${started.gw.base}${path}`, { headers: { ...alice, traceparent: `00-${traceId}-${hex(8)}-01`, tracestate: 'vendor=opaque' } });
    expect(res.status).toBe(200);
    const upstream = lastSeen(path);
    const sent = parseTraceparent(upstream.traceparent);
    expect(sent.traceId).toBe(traceId);
    expect(sent.sampled).toBe(true);
    expect(upstream.tracestate).toBe('vendor=opaque');
    const spans = await spansOf(traceId, 2);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    const client = spans.find((s) => s.kind === SPAN_KIND.CLIENT)!;
    expect(client.parentSpanId).toBe(server.spanId);
    expect(sent.parentId).toBe(client.spanId);
    expect(client.name).toBe('GET');
    expect(client.attributes).toEqual({
      'http.request.method': 'GET', 'http.response.status_code': 200, 'server.address': '127.0.0.1',
      'server.port': Number(new URL(h2Url).port), 'url.full': `${h2Url}/v1/h2/items`,
    });
    expect(client.statusCode).not.toBe(2);
    expect(JSON.stringify(spans)).not.toContain('?n=');
  });

  it('a gRPC call over h2c: the upstream\'s metadata carries the CLIENT span\'s traceparent', async () => {
    const traceId = hex(16);
    const session = h2connect(started.gw.base);
    try {
      const stream = session.request({
        ':method': 'POST', ':path': '/test.Echo/Unary', 'content-type': 'application/grpc', te: 'trailers',
        authorization: alice.authorization, traceparent: `00-${traceId}-${hex(8)}-01`,
      });
      const trailers = new Promise<Record<string, unknown>>((resolve) => stream.on('trailers', resolve));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
      stream.resume();
      expect((await trailers)['grpc-status']).toBe('0');
    } finally {
      session.close();
    }
    const sent = parseTraceparent(lastSeen('/test.Echo/Unary').traceparent);
    expect(sent.traceId).toBe(traceId);
    const spans = await spansOf(traceId, 2);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    const client = spans.find((s) => s.kind === SPAN_KIND.CLIENT)!;
    expect(server.attributes['network.protocol.version']).toBe('2');
    expect(client.parentSpanId).toBe(server.spanId);
    expect(client.spanId).toBe(sent.parentId);
    expect(client.attributes).toMatchObject({ 'http.request.method': 'POST', 'http.response.status_code': 200, 'url.full': `${h2Url}/test.Echo/Unary` });
  });

  it('a target that refuses the connection: the CLIENT span is an error (ECONNREFUSED), as an HTTP/1.1 upstream\'s', async () => {
    const traceId = hex(16);
    const res = await fetch(`${started.gw.base}/v1/gone`, { headers: { ...alice, traceparent: `00-${traceId}-${hex(8)}-01` } });
    expect(res.status).toBe(502);
    const spans = await spansOf(traceId, 2);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    const client = spans.find((s) => s.kind === SPAN_KIND.CLIENT)!;
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 502, 'error.type': 'bad_gateway' });
    expect(client.parentSpanId).toBe(server.spanId);
    expect(client.attributes['error.type']).toBe('ECONNREFUSED');
    expect(client.statusCode).toBe(2);
  });
});

describe('OTEL_PROPAGATORS', () => {
  it('adds b3 and baggage beside W3C Trace Context: the upstream gets both headers of the client span, and the baggage', async () => {
    const { gw } = await gatewayWith({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_PROPAGATORS: 'tracecontext,baggage,b3', OTEL_BSP_SCHEDULE_DELAY: '50' });
    try {
      const traceId = hex(16);
      const path = `/v1/items?b3=${traceId}`;
      expect((await fetch(`${gw.base}${path}`, { headers: { ...alice, traceparent: `00-${traceId}-${hex(8)}-01`, baggage: 'tenant=acme' } })).status).toBe(200);
      const headers = receivedAt(path).headers;
      const sent = parseTraceparent(headers.traceparent);
      expect(headers.b3).toBe(`${traceId}-${sent.parentId}-1`);
      expect(headers.baggage).toBe('tenant=acme');
      const spans = await spansOf(traceId, 2);
      expect(spans.find((s) => s.kind === SPAN_KIND.CLIENT)!.spanId).toBe(sent.parentId);
    } finally {
      await gw.close();
    }
  });
});

describe('tracing off', () => {
  for (const [what, env, tracing] of [
    ['without an endpoint', {}, undefined],
    ['with OTEL_SDK_DISABLED=true, whatever else is set', { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'placeholder' }, { endpoint: 'placeholder' }],
  ] as const) {
    it(`${what}: nothing is exported, and the caller's traceparent and tracestate reach the upstream unchanged`, async () => {
      const endpoint = { ...env } as Record<string, string>;
      if (endpoint.OTEL_EXPORTER_OTLP_ENDPOINT) endpoint.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
      const { gw, logs } = await gatewayWith(endpoint, tracing ? { endpoint: receiver.url } : undefined);
      const traceId = hex(16);
      const traceparent = `00-${traceId}-${hex(8)}-01`;
      const path = `/v1/items?n=${traceId}`;
      try {
        expect((await fetch(`${gw.base}${path}`, { headers: { ...alice, traceparent, tracestate: 'vendor=x' } })).status).toBe(200);
        expect(receivedAt(path).headers.traceparent).toBe(traceparent);
        expect(receivedAt(path).headers.tracestate).toBe('vendor=x');
      } finally {
        // Closing exports whatever a tracer had queued: after it, nothing more can come.
        await gw.close();
      }
      expect(receiver.spans.filter((s) => s.traceId === traceId)).toEqual([]);
      const access = logLines(logs).find((l) => l.msg === 'request');
      expect(access).toMatchObject({ status: 200, protocol: 'h1' });
      expect(access).not.toHaveProperty('trace_id');
      expect(logLines(logs).some((l) => l.msg === 'tracing on')).toBe(false);
    });
  }
});

describe('a collector that fails', () => {
  it('never slows or fails a request; the spans it loses are counted (export_failed, queue_full)', async () => {
    // A collector that accepts connections and never answers: each export waits OTEL_BSP_EXPORT_TIMEOUT.
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { gw } = await gatewayWith({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(silent.address() as { port: number }).port}`,
      OTEL_BSP_SCHEDULE_DELAY: '10', OTEL_BSP_MAX_QUEUE_SIZE: '2', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2', OTEL_BSP_EXPORT_TIMEOUT: '2000',
    });
    const dropped = async (reason: string) => (await gw.gateway.metrics.tracingSpansDropped.get()).values.find((v) => v.labels.reason === reason)?.value;
    try {
      expect(await dropped('queue_full')).toBe(0);
      expect(await dropped('export_failed')).toBe(0);
      for (let i = 0; i < 10; i++) {
        const started = performance.now();
        expect((await fetch(`${gw.base}/v1/items`, { headers: alice })).status).toBe(200);
        // Far below the export timeout: the request never waits for an export.
        expect(performance.now() - started).toBeLessThan(1000);
      }
      await expect.poll(() => dropped('queue_full'), { timeout: 5000 }).toBeGreaterThan(0);
      await expect.poll(() => dropped('export_failed'), { timeout: 10_000 }).toBeGreaterThan(0);
    } finally {
      await gw.close();
      silent.closeAllConnections();
      silent.close();
    }
  });
});
