import { createServer, type Server } from 'node:http';

/** One span as the receiver read it from an export, whichever encoding it came in. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 2 SERVER, 3 CLIENT, 1 INTERNAL. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  /** The resource's attributes (service.name …). */
  resource: Record<string, string | number | boolean>;
  /** The Content-Type of the export it came in. */
  contentType: string;
}

export const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;

/**
 * A real OTLP/HTTP traces receiver: POST /v1/traces in `application/json` or `application/x-protobuf`,
 * each decoded by the OTLP definitions (opentelemetry-proto) into spans, answered 200 with an empty
 * ExportTraceServiceResponse.
 */
export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Every request it got (path and content type). */
  requests: Array<{ path: string; contentType: string; headers: Record<string, string | string[] | undefined> }>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: OtlpReceiver['requests'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const contentType = req.headers['content-type'] ?? '';
      requests.push({ path: req.url ?? '', contentType, headers: req.headers });
      const body = Buffer.concat(chunks);
      try {
        if (req.url !== '/v1/traces') throw new Error(`unexpected path ${req.url}`);
        if (contentType.startsWith('application/json')) {
          spans.push(...fromJson(JSON.parse(body.toString('utf8')) as JsonRequest, contentType));
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } else if (contentType.startsWith('application/x-protobuf')) {
          spans.push(...fromProtobuf(body, contentType));
          res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        } else {
          throw new Error(`unexpected content type ${contentType}`);
        }
      } catch (err) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    spans,
    requests,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

// --- http/json: OTLP/JSON (ids as hex, enums as numbers, 64-bit integers as strings or numbers) ---

interface JsonValue { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number }
interface JsonKeyValue { key: string; value: JsonValue }
interface JsonRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: Array<{ spans?: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: JsonKeyValue[]; status?: { code?: number } }> }>;
  }>;
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

function fromJson(body: JsonRequest, contentType: string): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const resource = jsonAttributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId.toLowerCase(), spanId: s.spanId.toLowerCase(), parentSpanId: (s.parentSpanId ?? '').toLowerCase(),
          name: s.name, kind: s.kind, attributes: jsonAttributes(s.attributes), statusCode: s.status?.code ?? 0, resource, contentType,
        });
      }
    }
  }
  return out;
}

// --- http/protobuf: the protobuf wire format, read by field numbers of opentelemetry-proto ---

/** One field of a message: its number and its value (a varint as bigint, bytes for length-delimited, fixed as a Buffer). */
interface Field { n: number; varint?: bigint; bytes?: Buffer; fixed?: Buffer }

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[i++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const n = key >>> 3;
    const wire = key & 7;
    if (wire === 0) out.push({ n, varint: varint() });
    else if (wire === 1) { out.push({ n, fixed: buf.subarray(i, i + 8) }); i += 8; }
    else if (wire === 2) { const len = Number(varint()); out.push({ n, bytes: buf.subarray(i, i + len) }); i += len; }
    else if (wire === 5) { out.push({ n, fixed: buf.subarray(i, i + 4) }); i += 4; }
    else throw new Error(`protobuf wire type ${wire} not expected`);
  }
  return out;
}

const sub = (fs: Field[], n: number): Buffer[] => fs.filter((f) => f.n === n && f.bytes).map((f) => f.bytes!);
const one = (fs: Field[], n: number): Field | undefined => fs.find((f) => f.n === n);

/** KeyValue { 1 key; 2 AnyValue { 1 string, 2 bool, 3 int, 4 double } } */
function protoAttributes(list: Buffer[]): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of list) {
    const f = fields(kv);
    const key = one(f, 1)?.bytes?.toString('utf8') ?? '';
    const value = fields(one(f, 2)?.bytes ?? Buffer.alloc(0));
    const s = one(value, 1);
    const b = one(value, 2);
    const n = one(value, 3);
    const d = one(value, 4);
    if (s?.bytes) out[key] = s.bytes.toString('utf8');
    else if (b?.varint !== undefined) out[key] = b.varint !== 0n;
    else if (n?.varint !== undefined) out[key] = Number(BigInt.asIntN(64, n.varint));
    else if (d?.fixed) out[key] = d.fixed.readDoubleLE(0);
  }
  return out;
}

/**
 * ExportTraceServiceRequest { 1 ResourceSpans { 1 Resource { 1 attributes }, 2 ScopeSpans { 2 Span } } };
 * Span { 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind, 9 attributes, 15 Status { 3 code } }.
 */
function fromProtobuf(body: Buffer, contentType: string): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of sub(fields(body), 1)) {
    const rsf = fields(rs);
    const resource = protoAttributes(sub(fields(sub(rsf, 1)[0] ?? Buffer.alloc(0)), 1));
    for (const ss of sub(rsf, 2)) {
      for (const span of sub(fields(ss), 2)) {
        const f = fields(span);
        const status = fields(one(f, 15)?.bytes ?? Buffer.alloc(0));
        out.push({
          traceId: one(f, 1)?.bytes?.toString('hex') ?? '',
          spanId: one(f, 2)?.bytes?.toString('hex') ?? '',
          parentSpanId: one(f, 4)?.bytes?.toString('hex') ?? '',
          name: one(f, 5)?.bytes?.toString('utf8') ?? '',
          kind: Number(one(f, 6)?.varint ?? 0n),
          attributes: protoAttributes(sub(f, 9)),
          statusCode: Number(one(status, 3)?.varint ?? 0n),
          resource,
          contentType,
        });
      }
    }
  }
  return out;
}
