/**
 * The OpenTelemetry SDK, loaded (a dynamic import of this module) only when tracing is on: off, none of
 * it is in the process. One GatewayTracer per gateway, with its own provider, sampler, batch processor
 * and exporter; the context manager (AsyncLocalStorage) and the log's trace fields are the process's.
 */
import type { ClientRequest, IncomingHttpHeaders, IncomingMessage } from 'node:http';
import {
  context, createContextKey, defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace,
  type Attributes, type Context, type Span, type TextMapPropagator, type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, ExportResultCode, W3CBaggagePropagator, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { B3InjectEncoding, B3Propagator } from '@opentelemetry/propagator-b3';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler,
  type ReadableSpan, type Sampler, type Span as SdkSpan, type SpanExporter, type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import type { Exchange, ExchangeTrace, ExchangeTracer, UpstreamCall } from '../core/exchange.js';
import { useTraceFields } from '../log.js';
import type { TracingSettings } from './settings.js';
import { useInnerSpans, useInnerSpanStart, type InnerEnd } from './inner.js';

/** Why spans were not exported (the auth_gateway_tracing_spans_dropped_total metric). */
export type DropReason = 'queue_full' | 'export_failed';

export interface LoadedTracer extends ExchangeTracer {
  /** Exports what is queued, then stops (the gateway's close). */
  shutdown(): Promise<void>;
}

/** The context key of the tracer whose trace a context is in (inner spans are started with it). */
const TRACER = createContextKey('auth-gateway tracer');

let contextManager: AsyncLocalStorageContextManager | undefined;

/** Builds the tracer of one gateway; `dropped` counts spans lost (a full queue, a failed export). */
export function createTracer(settings: TracingSettings, version: string, dropped: (reason: DropReason, n: number) => void): LoadedTracer {
  if (contextManager === undefined) {
    contextManager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contextManager);
    useTraceFields(activeTraceFields);
    useInnerSpans(innerSpan);
    useInnerSpanStart(innerSpanStart);
  }
  const exporter = new CountingExporter(
    settings.protocol === 'http/json'
      ? new JsonExporter({ url: settings.url, headers: settings.headers, timeoutMillis: settings.batch.exportTimeoutMillis })
      : new ProtobufExporter({ url: settings.url, headers: settings.headers, timeoutMillis: settings.batch.exportTimeoutMillis }),
    dropped,
  );
  const processor = new BoundedProcessor(new BatchSpanProcessor(exporter, settings.batch), exporter, settings.batch.maxQueueSize, dropped);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': version }),
    sampler: samplerOf(settings),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('auth-gateway', version);
  const propagator = propagatorOf(settings.propagators);
  return {
    start: (ex) => new ServerTrace(tracer, propagator, ex),
    shutdown: () => provider.shutdown(),
  };
}

function samplerOf(settings: TracingSettings): Sampler {
  const ratio = new TraceIdRatioBasedSampler(settings.ratio);
  switch (settings.sampler) {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return ratio;
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: ratio });
  }
}

/** W3C Trace Context always; `baggage`, `b3` (single header) and `b3multi` as OTEL_PROPAGATORS adds them. */
function propagatorOf(names: string[]): TextMapPropagator {
  const propagators: TextMapPropagator[] = [new W3CTraceContextPropagator()];
  if (names.includes('baggage')) propagators.push(new W3CBaggagePropagator());
  if (names.includes('b3')) propagators.push(new B3Propagator({ injectEncoding: B3InjectEncoding.SINGLE_HEADER }));
  if (names.includes('b3multi')) propagators.push(new B3Propagator({ injectEncoding: B3InjectEncoding.MULTI_HEADER }));
  return propagators.length === 1 ? propagators[0]! : new CompositePropagator({ propagators });
}

/** The log's trace fields: the ids of the span active where a line is logged. */
function activeTraceFields(): { trace_id: string; span_id: string } | undefined {
  const sc = trace.getSpanContext(context.active());
  return sc === undefined ? undefined : { trace_id: sc.traceId, span_id: sc.spanId };
}

/** A span around slow inner work (see inner.ts), a child of the exchange's span; none outside a recorded trace. */
function innerSpan<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
  const active = context.active();
  const tracer = active.getValue(TRACER) as Tracer | undefined;
  if (tracer === undefined || !trace.getSpan(active)?.isRecording()) return fn();
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, active);
  return context.with(trace.setSpan(active, span), fn).then((value) => {
    span.end();
    return value;
  }, (err: unknown) => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    span.end();
    throw err;
  });
}

/** A span for a call under way, a child of the exchange's span; undefined outside a recorded trace. */
function innerSpanStart(name: string, attributes: Attributes): InnerEnd | undefined {
  const active = context.active();
  const tracer = active.getValue(TRACER) as Tracer | undefined;
  if (tracer === undefined || !trace.getSpan(active)?.isRecording()) return undefined;
  const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, active);
  return (err) => {
    if (err !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    span.end();
  };
}

/** The SERVER span of one exchange: a request's trace continued (its traceparent), else a new one. */
class ServerTrace implements ExchangeTrace {
  readonly traceId: string;
  readonly spanId: string;
  private readonly span: Span;
  private readonly context: Context;
  private ended = false;

  constructor(private readonly tracer: Tracer, private readonly propagator: TextMapPropagator, ex: Exchange) {
    const req = ex.req;
    const parent = propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
    this.span = tracer.startSpan(ex.method, { kind: SpanKind.SERVER }, parent);
    if (this.span.isRecording()) {
      const ua = req.headers['user-agent'];
      const host = req.headers[':authority'] ?? req.headers.host;
      this.span.setAttributes({
        'http.request.method': ex.method,
        'url.scheme': (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http',
        'server.address': typeof host === 'string' ? host.replace(/:\d+$/, '') : undefined,
        'network.protocol.version': req.httpVersionMajor >= 2 ? '2' : req.httpVersion,
        'user_agent.original': typeof ua === 'string' ? ua : undefined,
      });
    }
    const sc = this.span.spanContext();
    this.traceId = sc.traceId;
    this.spanId = sc.spanId;
    this.context = trace.setSpan(parent, this.span).setValue(TRACER, tracer);
  }

  within<T>(fn: () => T): T {
    return context.with(this.context, fn);
  }

  upstreamCall(headers: IncomingHttpHeaders, method: string, origin: string, path: string): UpstreamCall {
    const url = new URL(origin);
    const span = this.tracer.startSpan(method, { kind: SpanKind.CLIENT }, this.context);
    if (span.isRecording()) {
      const q = path.indexOf('?');
      span.setAttributes({
        'http.request.method': method,
        'server.address': url.hostname,
        'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
        // Never the query: its values can be tokens or personal data (as the access line).
        'url.full': origin + (q < 0 ? path : path.slice(0, q)),
      });
    }
    this.propagator.inject(trace.setSpan(this.context, span), headers, defaultTextMapSetter);
    return new ClientCall(span);
  }

  end(ex: Exchange): void {
    if (this.ended) return;
    this.ended = true;
    const span = this.span;
    if (span.isRecording()) {
      const status = ex.forwardAuth?.relayed ?? ex.res.statusCode;
      const route = ex.route?.path;
      span.updateName(route === undefined ? ex.method : `${ex.method} ${route}`);
      span.setAttributes({
        'url.path': ex.path,
        'http.route': route,
        'http.response.status_code': status,
        'client.address': ex.address,
        // The principal's user; a token call that succeeded names the user it signed in (never a refused name).
        'enduser.id': ex.principal?.user ?? (status < 400 ? ex.triedUser : undefined),
        'auth_gateway.via': ex.principal?.via,
        'auth_gateway.request_id': ex.requestId,
        // Why the gateway refused or failed it: the problem code of its answer.
        'auth_gateway.code': ex.problem,
        'auth_gateway.cut': ex.cut,
      });
      if (status >= 500) {
        span.setAttribute('error.type', ex.problem ?? String(status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
    }
    span.end();
  }
}

/** The CLIENT span of one attempt: ends with the upstream's answer (its body read) or the attempt's failure. */
class ClientCall implements UpstreamCall {
  private ended = false;

  constructor(private readonly span: Span) {}

  follow(request: ClientRequest): void {
    let answered = false;
    request.once('response', (res: IncomingMessage) => {
      answered = true;
      this.answered(res.statusCode ?? 0);
      res.once('close', () => this.end());
    });
    request.once('upgrade', (res: IncomingMessage) => {
      this.span.setAttribute('http.response.status_code', res.statusCode ?? 101);
      this.end();
    });
    request.once('error', (err: NodeJS.ErrnoException) => {
      this.failed(err.code ?? err.name, err.message);
      this.end();
    });
    request.once('close', () => {
      if (!answered) this.end();
    });
  }

  answered(status: number): void {
    this.span.setAttribute('http.response.status_code', status);
    if (status >= 500) {
      this.span.setAttribute('error.type', String(status));
      this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
  }

  failed(type: string, message?: string): void {
    this.span.setAttribute('error.type', type);
    this.span.setStatus({ code: SpanStatusCode.ERROR, message });
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end();
  }
}

/**
 * The exporter, counting what leaves the queue (`taken`, read by BoundedProcessor) and the spans of
 * exports that failed: a failed export is never retried past its timeout, and never waits a request.
 */
class CountingExporter implements SpanExporter {
  taken = 0;

  constructor(private readonly inner: SpanExporter, private readonly dropped: (reason: DropReason, n: number) => void) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.taken += spans.length;
    this.inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.dropped('export_failed', spans.length);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The batch processor, with the spans it drops for a full queue counted: it holds what was handed to it
 * and not yet taken by the exporter, and drops (silently but for a debug line) past maxQueueSize.
 */
class BoundedProcessor implements SpanProcessor {
  private handed = 0;

  constructor(
    private readonly inner: BatchSpanProcessor,
    private readonly exporter: CountingExporter,
    private readonly maxQueueSize: number,
    private readonly dropped: (reason: DropReason, n: number) => void,
  ) {}

  onStart(span: SdkSpan, parent: Context): void {
    this.inner.onStart(span, parent);
  }

  onEnd(span: ReadableSpan): void {
    // Only sampled spans are queued (the others are not recording and never reach here).
    if (this.handed - this.exporter.taken >= this.maxQueueSize) this.dropped('queue_full', 1);
    else this.handed++;
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

