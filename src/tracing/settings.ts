import type { TracingConfig } from '../config/types.js';

/** OTLP over HTTP, as `OTEL_EXPORTER_OTLP_PROTOCOL` names the two the gateway sends. */
type OtlpProtocol = 'http/protobuf' | 'http/json';

/** How new traces are sampled (the `OTEL_TRACES_SAMPLER` values). */
type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

/** Tracing as it is on: where spans go, how, and which. */
export interface TracingSettings {
  /** The full traces URL (`…/v1/traces`). */
  url: string;
  protocol: OtlpProtocol;
  serviceName: string;
  headers: Record<string, string>;
  sampler: SamplerName;
  /** The ratio of the ratio samplers (0 to 1). */
  ratio: number;
  /** Extra propagators beside W3C Trace Context (OTEL_PROPAGATORS): `baggage`, `b3`, `b3multi`. */
  propagators: string[];
  /** The batch span processor's bounds (the OTEL_BSP_* variables; the SDK's defaults otherwise). */
  batch: BatchSettings;
}

interface BatchSettings {
  scheduledDelayMillis: number;
  maxQueueSize: number;
  maxExportBatchSize: number;
  exportTimeoutMillis: number;
}

type Env = Record<string, string | undefined>;

const SAMPLERS = new Set<string>(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']);
const PROTOCOLS = new Set<string>(['http/protobuf', 'http/json']);

/**
 * Tracing from the `tracing` section and the standard OTEL_* variables, the environment winning (as
 * the OpenTelemetry specification says). Undefined (off: no SDK is loaded) without an endpoint, or with
 * `OTEL_SDK_DISABLED=true` whatever else is set. Throws on a value it cannot use, naming the variable.
 */
export function tracingSettings(section: TracingConfig | undefined, env: Env = process.env): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const url = tracesUrl(section, env);
  if (url === undefined) return undefined;
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim() || section?.protocol || 'http/protobuf';
  if (!PROTOCOLS.has(protocol)) throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL: ${protocol} is not http/protobuf or http/json (grpc is not supported)`);
  const sampler = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() || 'parentbased_traceidratio';
  if (!SAMPLERS.has(sampler)) throw new Error(`OTEL_TRACES_SAMPLER: ${sampler} is not one of ${[...SAMPLERS].join(', ')}`);
  let ratio = section?.sampleRatio ?? 1;
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  if (arg && sampler.endsWith('traceidratio')) {
    ratio = Number(arg);
    if (!(ratio >= 0 && ratio <= 1)) throw new Error(`OTEL_TRACES_SAMPLER_ARG: ${arg} is not a number from 0 to 1`);
  }
  return {
    url,
    protocol: protocol as OtlpProtocol,
    serviceName: env.OTEL_SERVICE_NAME?.trim() || section?.serviceName || 'auth-gateway',
    headers: { ...section?.headers, ...parseHeaders(env.OTEL_EXPORTER_OTLP_HEADERS), ...parseHeaders(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS) },
    sampler: sampler as SamplerName,
    ratio,
    batch: {
      scheduledDelayMillis: positive(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000),
      maxQueueSize: positive(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048),
      maxExportBatchSize: positive(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512),
      exportTimeoutMillis: positive(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000),
    },
    propagators: (env.OTEL_PROPAGATORS ?? '').split(',').map((p) => p.trim().toLowerCase()).filter((p) => p !== '' && p !== 'tracecontext'),
  };
}

/** A whole number of at least 1 from the variable `name`, else `fallback`. */
function positive(env: Env, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: ${raw} is not a whole number of at least 1`);
  return n;
}

/** The signal-specific URL as it is, else the base one (environment, then the section) with `/v1/traces`. */
function tracesUrl(section: TracingConfig | undefined, env: Env): string | undefined {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || section?.endpoint;
  if (!base) return undefined;
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

/** `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs, comma-separated, values percent-encoded. */
export function parseHeaders(raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (raw ?? '').split(',')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const name = pair.slice(0, eq).trim().toLowerCase();
    try {
      out[name] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      out[name] = pair.slice(eq + 1).trim();
    }
  }
  return out;
}
