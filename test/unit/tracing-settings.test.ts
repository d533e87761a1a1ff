import { describe, expect, it } from 'vitest';
import { checkConfig } from '../../src/config/validate.js';
import type { TracingConfig } from '../../src/config/types.js';
import { parseHeaders, tracingSettings } from '../../src/tracing/settings.js';

const section: TracingConfig = { endpoint: 'http://collector:4318/', protocol: 'http/json', serviceName: 'edge', sampleRatio: 0.25, headers: { 'x-token': 'from-config', 'x-other': 'kept' } };

describe('tracing settings: the tracing section and the OTEL_* variables', () => {
  it('is off without an endpoint, and with OTEL_SDK_DISABLED=true whatever else is set', () => {
    expect(tracingSettings(undefined, {})).toBeUndefined();
    expect(tracingSettings({ ...section, endpoint: undefined }, {})).toBeUndefined();
    expect(tracingSettings(section, { OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(tracingSettings(undefined, { OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBeUndefined();
    expect(tracingSettings(undefined, { OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBeDefined();
  });

  it('takes the section alone: the traces path added to the base URL, parent-based ratio sampling', () => {
    expect(tracingSettings(section, {})).toMatchObject({
      url: 'http://collector:4318/v1/traces', protocol: 'http/json', serviceName: 'edge', sampler: 'parentbased_traceidratio', ratio: 0.25,
      headers: { 'x-token': 'from-config', 'x-other': 'kept' }, propagators: [],
      batch: { scheduledDelayMillis: 5000, maxQueueSize: 2048, maxExportBatchSize: 512, exportTimeoutMillis: 30_000 },
    });
  });

  it('lets the environment win, as the specification says', () => {
    const s = tracingSettings(section, {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_SERVICE_NAME: 'from-env',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-token=from%20env',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0',
      OTEL_PROPAGATORS: 'tracecontext,baggage,b3',
      OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_BSP_MAX_QUEUE_SIZE: '10', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '5', OTEL_BSP_EXPORT_TIMEOUT: '1000',
    });
    expect(s).toMatchObject({
      url: 'http://env:4318/v1/traces', protocol: 'http/protobuf', serviceName: 'from-env', sampler: 'traceidratio', ratio: 0,
      headers: { 'x-token': 'from env', 'x-other': 'kept' }, propagators: ['baggage', 'b3'],
      batch: { scheduledDelayMillis: 100, maxQueueSize: 10, maxExportBatchSize: 5, exportTimeoutMillis: 1000 },
    });
    // The signal's own variables win over the general ones; its endpoint is the full URL.
    expect(tracingSettings(section, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }))
      .toMatchObject({ url: 'http://traces:4318/custom', protocol: 'http/json' });
  });

  it('refuses what it cannot use, naming the variable', () => {
    expect(() => tracingSettings(section, { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL: grpc/);
    expect(() => tracingSettings(section, { OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/OTEL_TRACES_SAMPLER/);
    expect(() => tracingSettings(section, { OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
    expect(() => tracingSettings(section, { OTEL_BSP_MAX_QUEUE_SIZE: '0' })).toThrow(/OTEL_BSP_MAX_QUEUE_SIZE/);
  });

  it('reads OTEL_EXPORTER_OTLP_HEADERS as percent-encoded pairs', () => {
    expect(parseHeaders('Authorization=Bearer%20abc, x-a = 1 ,broken')).toEqual({ authorization: 'Bearer abc', 'x-a': '1' });
  });
});

describe('the tracing section', () => {
  const minimal = {
    users: { htpasswd: 'users.htpasswd' },
    tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
  };

  it('is checked: a URL endpoint, a ratio from 0 to 1, header names, known keys', () => {
    const { config, problems } = checkConfig({ ...minimal, tracing: { endpoint: 'http://c:4318', sampleRatio: 0, headers: { Authorization: 'Bearer x' } } }, '', '/tmp');
    expect(problems).toEqual([]);
    expect(config.tracing).toEqual({ endpoint: 'http://c:4318', protocol: 'http/protobuf', serviceName: 'auth-gateway', sampleRatio: 0, headers: { authorization: 'Bearer x' } });
    const bad = checkConfig({ ...minimal, tracing: { endpoint: 'collector', sampleRatio: 2, protocol: 'grpc', headers: { 'bad name': 'x' }, sampler: 1 } }, '', '/tmp');
    expect(bad.problems).toEqual(expect.arrayContaining([
      'tracing.endpoint must be a valid URL; found "collector"',
      'tracing.sampleRatio must be a number from 0 to 1; found 2',
      'tracing.protocol must be one of http/protobuf, http/json; found "grpc"',
      'tracing.headers.bad name is not a header name',
    ]));
    expect(bad.problems.some((p) => p.startsWith('tracing.sampler is not a known setting'))).toBe(true);
  });
});
