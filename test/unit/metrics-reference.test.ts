import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { METRICS_DOC, renderMetricsTable, withMetricsTable } from '../../src/admin/metrics-reference.js';
import { createMetrics } from '../../src/admin/metrics.js';
import { parsePrometheus, sampleValue } from '../support/prometheus.js';

const ROOT = join(import.meta.dirname, '../..');

describe('the metric table of docs/operating.md', () => {
  it('is the one generated from the registry (run `npm run docs:metrics` after changing a metric)', () => {
    const doc = readFileSync(join(ROOT, METRICS_DOC), 'utf8');
    expect(doc).toBe(withMetricsTable(doc));
  });

  it('names every series of the registry with its type and labels', async () => {
    const table = renderMetricsTable();
    expect(table).toContain('| `auth_gateway_requests_total` | counter | `route`, `method`, `status_class`, `auth`, `protocol` |');
    expect(table).toContain('| `auth_gateway_request_duration_seconds` | histogram | `route`, `method` |');
    expect(table).toContain('`process_cpu_seconds_total`');
    expect(table).toContain('`nodejs_eventloop_lag_seconds`');
    const metrics = createMetrics();
    for (const m of await metrics.registry.getMetricsAsJSON()) expect(table).toContain(`\`${m.name}\``);
  });
});

describe('counters with a closed set of label values', () => {
  it('start at 0 for each value, before any event', async () => {
    const metrics = createMetrics();
    metrics.known({ upstreams: ['up'], issuers: ['corp'], routes: ['/v1/items'] });
    const samples = parsePrometheus(await metrics.registry.metrics());
    const zero = (name: string, labels: Record<string, string>) => expect(sampleValue(samples, name, labels), `${name} ${JSON.stringify(labels)}`).toBe(0);
    for (const reason of ['rapid_reset', 'continuation', 'settings_flood', 'ping_flood', 'invalid_frames', 'header_list', 'protocol_error']) {
      zero('auth_gateway_http2_floods_total', { reason });
    }
    for (const endpoint of ['create', 'basic']) zero('auth_gateway_lockout_refusals_total', { endpoint });
    for (const replication of ['replicated', 'unreplicated', 'refused']) zero('auth_gateway_store_session_writes_total', { replication });
    for (const status of ['200', '401', '403', '429', '503']) zero('auth_gateway_forward_auth_answers_total', { status });
    for (const operation of ['create', 'refresh', 'revoke']) zero('auth_gateway_token_operations_total', { operation, outcome: 'ok' });
    for (const kind of ['refused', 'reset', 'timeout']) zero('auth_gateway_upstream_errors_total', { upstream: 'up', kind });
    for (const result of ['ok', 'error']) zero('auth_gateway_provider_key_fetches_total', { issuer: 'corp', result });
    zero('auth_gateway_rate_limited_total', { route: '/v1/items' });
    zero('auth_gateway_forbidden_total', { route: '/v1/items' });
  });

  it('keep counting from 0 (a known name given again does not reset its series)', async () => {
    const metrics = createMetrics();
    metrics.known({ upstreams: ['up'], issuers: [], routes: [] });
    metrics.upstreamErrors.inc({ upstream: 'up', kind: 'refused' });
    metrics.known({ upstreams: ['up', 'other'], issuers: [], routes: [] });
    const samples = parsePrometheus(await metrics.registry.metrics());
    expect(sampleValue(samples, 'auth_gateway_upstream_errors_total', { upstream: 'up', kind: 'refused' })).toBe(1);
    expect(sampleValue(samples, 'auth_gateway_upstream_errors_total', { upstream: 'other', kind: 'refused' })).toBe(0);
  });
});
