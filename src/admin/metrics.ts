import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ReplicationStats } from '../stores/store-contracts.js';
import type { FloodReason } from '../http/http2.js';
import type { ProblemCode } from '../http/problem.js';
import { TallyCounter, TallyHistogram } from './tally.js';

export const METRIC_PREFIX = 'auth_gateway_';

/** Why a request to an upstream failed (counted by the Forwarder, each failed attempt). */
type UpstreamErrorKind = 'refused' | 'reset' | 'timeout';
export type TokenOperation = 'create' | 'refresh' | 'revoke';
/** Where a lockout refusal was answered: POST /v1/tokens/create or a Basic request. */
export type LockoutEndpoint = 'create' | 'basic';

/** What the gauges read at scrape time; each defaults to "nothing to report". */
interface MetricSources {
  /** Resolves when the token store answers (the /readyz check). */
  storePing?: () => Promise<void>;
  /** bcrypt checks waiting for or running on the thread pool. */
  bcryptPending?: () => number;
  /** The store's replication (store.waitForReplicas); undefined when it does not wait for replicas. */
  storeReplication?: () => ReplicationStats | undefined;
  /** Open WebSocket tunnels per upstream (the upstreams with any open or opening). */
  openTunnels?: () => Iterable<[string, number]>;
  /** Requests waiting for a connection to an upstream, per upstream (every configured one). */
  upstreamQueued?: () => Iterable<[string, number]>;
}

/**
 * The gateway's Prometheus series, in a registry of its own: every gateway (several in one test
 * process) counts for itself, and nothing imports a global registry. Created in the composition root
 * and handed to what counts. Label values are bounded: configured route paths or fixed words, never raw
 * paths or user names.
 */
export interface Metrics {
  readonly registry: Registry;
  /**
   * route: a configured route path, or `tokens`, `health`, `openapi`, `none`; method: bounded (see METHODS);
   * status_class: `2xx`…; auth: a principal's `via` or `none`; protocol: `http/1.0`, `http/1.1` or `h2`. Counted in plain numbers (see TallyCounter).
   */
  readonly requests: TallyCounter;
  /** By route and method. */
  readonly requestDuration: TallyHistogram;
  readonly upstreamErrors: Counter<'upstream' | 'kind'>;
  /** outcome: `ok` or the problem code the gateway answered with. */
  readonly tokenOperations: Counter<'operation' | 'outcome'>;
  readonly lockouts: Counter<'endpoint'>;
  readonly rateLimited: Counter<'route'>;
  /** Requests refused by a route's allow rules (403 forbidden), by route. */
  readonly forbidden: Counter<'route'>;
  /** Fetches of an OpenID provider's keys (identity.issuers), by issuer name and result (`ok`, `error`). */
  readonly providerKeyFetches: Counter<'issuer' | 'result'>;
  /** Forward-auth answers by status (200, 401, 403, 429, …). */
  readonly forwardAuthAnswers: Counter<'status'>;
  /** command: a TokenStore method name; result: `ok` or `error`. */
  readonly storeCommandDuration: Histogram<'command' | 'result'>;
  /** Connections ended for having more than server.maxPipelinedRequests requests waiting. */
  readonly pipeliningOverflows: Counter;
  /** HTTP/2 connections closed with GOAWAY for flooding, by reason (see src/http/http2.ts). */
  readonly http2Floods: Counter<'reason'>;
  /** Spans not exported, with tracing on: the queue was full, or their export failed. */
  readonly tracingSpansDropped: Counter<'reason'>;
  /** Answers the gateway wrote itself as a problem body, by code. */
  readonly refusals: Counter<'code'>;
  /** 1 while the last reload of the certificate, client CA or CRL files failed (the previous ones in use). */
  readonly tlsReloadFailing: Gauge;
  /** gRPC and gRPC-Web calls by route and the gRPC status they ended with, where the gateway saw it. */
  readonly grpcCalls: Counter<'route' | 'grpc_status'>;
  /** Sets what the store, bcrypt and open-tunnels gauges read when scraped. */
  watch(sources: MetricSources): void;
  /**
   * Starts at 0 the series of the names a configuration gives (upstreams, issuers, routes), each with
   * every value of its other labels, so `rate()` and `increase()` have a series from the first scrape.
   * Called with every configuration taken (a reload adds names; one removed keeps its series).
   */
  known(names: KnownNames): void;
  /**
   * Adds Node's default process metrics (CPU, memory, event loop, GC) once, under the names prom-client
   * gives them (`process_*`, `nodejs_*`, no prefix: what standard Node.js dashboards read); the admin
   * listener calls it.
   */
  collectProcessMetrics(): void;
}

/** The names of a configuration that label series (see Metrics.known). */
export interface KnownNames {
  upstreams: Iterable<string>;
  issuers: Iterable<string>;
  routes: Iterable<string>;
}

/** Every reason an HTTP/2 connection is closed for flooding (a record: a FloodReason added is a compile error here). */
const FLOOD_REASONS = Object.keys({
  rapid_reset: true, continuation: true, settings_flood: true, ping_flood: true, invalid_frames: true, header_list: true, protocol_error: true,
} satisfies Record<FloodReason, true>);
const UPSTREAM_ERROR_KINDS: readonly UpstreamErrorKind[] = ['refused', 'reset', 'timeout'];
const TOKEN_OPERATIONS: readonly TokenOperation[] = ['create', 'refresh', 'revoke'];
const LOCKOUT_ENDPOINTS: readonly LockoutEndpoint[] = ['create', 'basic'];
/** What the forward-auth endpoint answers: yes, not authenticated, not allowed, throttled, store or directory down. */
const FORWARD_AUTH_STATUSES = ['200', '401', '403', '429', '503'];
const REPLICATIONS = ['replicated', 'unreplicated', 'refused'];
/** Every problem code (a record: a ProblemCode added is a compile error here until it is listed). */
const PROBLEM_CODES = Object.keys({
  invalid_request: true, request_timeout: true, expectation_failed: true, malformed_json: true, unsupported_media_type: true,
  payload_too_large: true, method_not_allowed: true, not_found: true, invalid_path: true, uri_too_long: true,
  headers_too_large: true, missing_credentials: true, invalid_credentials: true, invalid_token: true, token_expired: true,
  invalid_refresh_token: true, forbidden: true, too_many_attempts: true, rate_limited: true, websocket_not_allowed: true,
  cors_not_allowed: true, invalid_page_size: true, invalid_page: true, invalid_sort: true, store_unavailable: true,
  identity_provider_unavailable: true, directory_unavailable: true, bad_gateway: true, gateway_timeout: true,
  service_unavailable: true, internal_error: true,
} satisfies Record<ProblemCode, true>);

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const STORE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** A store that has not answered a scrape's ping by then counts as down. */
const STORE_PING_TIMEOUT_MS = 1000;

export function createMetrics(): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const sources: MetricSources = {};
  let processMetrics = false;

  new Gauge({
    name: `${METRIC_PREFIX}store_up`,
    help: '1 when the token store answered a ping at scrape time (within 1 s), else 0',
    registers,
    // Over server.workers: 1 only when every worker reached the store.
    aggregator: 'min',
    async collect() {
      this.set(sources.storePing ? await answers(sources.storePing) : 0);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}store_replicas_connected`,
    help: 'replicas in sync with the store\'s master at the last look (only with store.waitForReplicas)',
    registers,
    collect() {
      const stats = sources.storeReplication?.();
      if (stats?.connected !== undefined) this.set(stats.connected);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}store_session_writes_refusing`,
    help: '1 while session writes (sign-ins, refreshes, revocations) are refused: store.durability strict with fewer replicas connected than store.waitForReplicas',
    registers,
    aggregator: 'max',
    collect() {
      const stats = sources.storeReplication?.();
      if (stats) this.set(stats.refusing ? 1 : 0);
    },
  });
  new Counter({
    name: `${METRIC_PREFIX}store_session_writes_total`,
    help: 'session writes with store.waitForReplicas, by replication: replicated, unreplicated (acknowledged without the replicas, store.durability available) or refused (strict)',
    labelNames: ['replication'] as const,
    registers,
    collect() {
      const stats = sources.storeReplication?.();
      this.reset();
      // Without store.waitForReplicas no write waits for replicas: every outcome stays at 0.
      for (const replication of REPLICATIONS) this.inc({ replication }, 0);
      if (!stats) return;
      for (const [replication, n] of Object.entries(stats.outcomes)) this.inc({ replication }, n);
    },
  });
  // Read when scraped, not counted per tunnel: every configured upstream (and one once seen) is in the output, at 0 when none is open.
  const tunnelUpstreams = new Set<string>();
  new Gauge({
    name: `${METRIC_PREFIX}websocket_tunnels`,
    help: 'open WebSocket tunnels, by upstream',
    labelNames: ['upstream'] as const,
    registers,
    collect() {
      const open = new Map(sources.openTunnels?.() ?? []);
      for (const upstream of open.keys()) tunnelUpstreams.add(upstream);
      for (const upstream of tunnelUpstreams) this.set({ upstream }, open.get(upstream) ?? 0);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}upstream_queued`,
    help: 'requests waiting for a connection to an upstream (all of its targets at maxConnections), by upstream',
    labelNames: ['upstream'] as const,
    registers,
    collect() {
      for (const [upstream, n] of sources.upstreamQueued?.() ?? []) this.set({ upstream }, n);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}bcrypt_queue_depth`,
    help: 'bcrypt password checks waiting for or running on the thread pool (503 past users.maxPendingVerifications)',
    registers,
    collect() {
      this.set(sources.bcryptPending?.() ?? 0);
    },
  });

  const metrics: Metrics = {
    registry,
    requests: new TallyCounter(`${METRIC_PREFIX}requests_total`, 'requests answered, by route (a configured route path, tokens, health, openapi, none), method (GET HEAD POST PUT PATCH DELETE OPTIONS, else other), status class (2xx…), auth method (the principal\'s via, or none) and protocol (http/1.0, http/1.1, h2)', ['route', 'method', 'status_class', 'auth', 'protocol'], registry),
    requestDuration: new TallyHistogram(`${METRIC_PREFIX}request_duration_seconds`, 'time from the request to the end of its response (proxied bodies included), by route and method', ['route', 'method'], SECONDS_BUCKETS, registry),
    upstreamErrors: new Counter({
      name: `${METRIC_PREFIX}upstream_errors_total`,
      help: 'failed attempts at an upstream (retried ones and responses cut mid-body included; an upstream\'s own 5xx is its answer, not an error), by upstream and kind (refused, reset, timeout)',
      labelNames: ['upstream', 'kind'] as const,
      registers,
    }),
    tokenOperations: new Counter({
      name: `${METRIC_PREFIX}token_operations_total`,
      help: 'token endpoint calls by operation (create, refresh, revoke) and outcome (ok or the problem code)',
      labelNames: ['operation', 'outcome'] as const,
      registers,
    }),
    lockouts: new Counter({
      name: `${METRIC_PREFIX}lockout_refusals_total`,
      help: 'requests refused because the user name or client address is locked out (429 too_many_attempts), by endpoint (create, basic)',
      labelNames: ['endpoint'] as const,
      registers,
    }),
    rateLimited: new Counter({
      name: `${METRIC_PREFIX}rate_limited_total`,
      help: 'requests refused by the per-principal rate limit (429 rate_limited), by route',
      labelNames: ['route'] as const,
      registers,
    }),
    forbidden: new Counter({
      name: `${METRIC_PREFIX}forbidden_total`,
      help: 'requests refused by the route\'s allow rules after authentication (403 forbidden), by route',
      labelNames: ['route'] as const,
      registers,
    }),
    providerKeyFetches: new Counter({
      name: `${METRIC_PREFIX}provider_key_fetches_total`,
      help: 'fetches of an OpenID provider\'s signing keys (identity.issuers), by issuer name and result (ok, error; an error keeps the cached keys)',
      labelNames: ['issuer', 'result'] as const,
      registers,
    }),
    forwardAuthAnswers: new Counter({
      name: `${METRIC_PREFIX}forward_auth_answers_total`,
      help: 'answers of the forward-auth endpoint, by status',
      labelNames: ['status'] as const,
      registers,
    }),
    storeCommandDuration: new Histogram({
      name: `${METRIC_PREFIX}store_command_duration_seconds`,
      help: 'token store calls by command and result, as the gateway waits for them (liveness cache hits, answered without waiting, are not store calls)',
      labelNames: ['command', 'result'] as const,
      buckets: STORE_BUCKETS,
      registers,
    }),
    pipeliningOverflows: new Counter({
      name: `${METRIC_PREFIX}pipelining_overflows_total`,
      help: 'connections closed after the answer in progress because more than server.maxPipelinedRequests requests were waiting on them',
      registers,
    }),
    grpcCalls: new Counter({
      name: `${METRIC_PREFIX}grpc_calls_total`,
      help: 'gRPC and gRPC-Web calls by route and the grpc-status they ended with (the gateway\'s own refusals, an upstream\'s answer)',
      labelNames: ['route', 'grpc_status'] as const,
      registers,
    }),
    http2Floods: new Counter({
      name: `${METRIC_PREFIX}http2_floods_total`,
      help: 'HTTP/2 connections closed with GOAWAY for flooding or breaking the protocol: rapid_reset, continuation, settings_flood, ping_flood, invalid_frames, header_list, protocol_error',
      labelNames: ['reason'] as const,
      registers,
    }),
    refusals: new Counter({
      name: `${METRIC_PREFIX}refusals_total`,
      help: 'answers the gateway wrote itself as a problem body (application/problem+json), by code',
      labelNames: ['code'] as const,
      registers,
    }),
    tracingSpansDropped: new Counter({
      name: `${METRIC_PREFIX}tracing_spans_dropped_total`,
      help: 'spans not exported (tracing on), by reason: queue_full (more than OTEL_BSP_MAX_QUEUE_SIZE waiting) or export_failed (the collector refused or did not answer in time)',
      labelNames: ['reason'] as const,
      registers,
    }),
    tlsReloadFailing: new Gauge({
      name: `${METRIC_PREFIX}tls_reload_failing`,
      help: '1 while the last reload of server.tls files (certificate, key, client CA, CRL) failed and the previous ones stay in use, else 0',
      registers,
    }),
    watch(next) {
      Object.assign(sources, next);
    },
    known(names) {
      for (const upstream of names.upstreams) {
        for (const kind of UPSTREAM_ERROR_KINDS) metrics.upstreamErrors.inc({ upstream, kind }, 0);
        tunnelUpstreams.add(upstream);
      }
      for (const issuer of names.issuers) {
        for (const result of ['ok', 'error']) metrics.providerKeyFetches.inc({ issuer, result }, 0);
      }
      for (const route of names.routes) {
        metrics.rateLimited.inc({ route }, 0);
        metrics.forbidden.inc({ route }, 0);
      }
    },
    collectProcessMetrics() {
      if (processMetrics) return;
      processMetrics = true;
      collectDefaultMetrics({ register: registry });
      // Gauges named like counters (`promtool check metrics` refuses them); each is the sum of the series
      // of the same name without `_total`, labelled by type: sum(nodejs_active_handles).
      for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
        registry.removeSingleMetric(name);
      }
    },
  };
  // The closed sets start at 0: an alert on a flood or a lockout has a series before the first one.
  for (const reason of FLOOD_REASONS) metrics.http2Floods.inc({ reason }, 0);
  for (const endpoint of LOCKOUT_ENDPOINTS) metrics.lockouts.inc({ endpoint }, 0);
  for (const operation of TOKEN_OPERATIONS) metrics.tokenOperations.inc({ operation, outcome: 'ok' }, 0);
  for (const status of FORWARD_AUTH_STATUSES) metrics.forwardAuthAnswers.inc({ status }, 0);
  for (const code of PROBLEM_CODES) metrics.refusals.inc({ code }, 0);
  metrics.tlsReloadFailing.set(0);
  for (const reason of ['queue_full', 'export_failed']) metrics.tracingSpansDropped.inc({ reason }, 0);
  return metrics;
}

async function answers(ping: () => Promise<void>): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), STORE_PING_TIMEOUT_MS);
  });
  try {
    await Promise.race([ping(), timeout]);
    return 1;
  } catch {
    return 0;
  } finally {
    clearTimeout(timer);
  }
}
