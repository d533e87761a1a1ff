import type { Exchange } from '../core/exchange.js';
import { recordedGrpcStatus } from '../core/grpc.js';
import type { LockoutEndpoint, Metrics, TokenOperation } from './metrics.js';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const TOKEN_OPERATIONS: Record<string, TokenOperation> = {
  '/v1/tokens/create': 'create',
  '/v1/tokens/refresh': 'refresh',
  '/v1/tokens/revoke': 'revoke',
};
const OWN_PATHS: Record<string, string> = { '/healthz': 'health', '/readyz': 'health', '/openapi.json': 'openapi' };

/**
 * Counts one finished request (`started`: performance.now() at its start) by what it ended as. It is
 * called outside the error handler, so it sees the final status and, for answers the gateway wrote
 * itself, the problem `code`: lockouts, rate-limit refusals and token outcomes are read from those codes.
 * `routeOf` names the configured route of a path, so no raw path ever becomes a label. The labelled
 * children are kept per label set: a request costs a Map lookup, not prom-client's hashing of a label object.
 */
export function requestCounter(metrics: Metrics, routeOf: (path: string) => string | undefined): (ex: Exchange) => void {
  const durationKeys = new SeriesKeys('');
  // The gRPC calls counter's children, by route and status: prom-client would hash a label object per call.
  const grpcKeys = new SeriesKeys('');
  const grpcCalls = new Map<string, { inc(): void }>();
  return (ex) => {
    const path = ex.path;
    const route = routeLabel(ex, path, routeOf);
    const method = METHODS.has(ex.method) ? ex.method : 'other';
    // A forward-auth refusal relayed sealed through the proxy (a 403 to it): the status its client gets.
    const status = ex.forwardAuth?.relayed ?? ex.res.statusCode;
    const statusClass = STATUS_CLASSES[Math.floor(status / 100)] ?? 'other';
    const auth = ex.principal?.via ?? 'none';
    const protocol = protocolOf(ex);
    const byMethod = durationKeys.at(route, method);
    const durationKey = byMethod.key;
    const countKey = byMethod.at(statusClass, auth).at(protocol, '').key;
    if (!metrics.requests.inc(countKey)) metrics.requests.add(countKey, { route, method, status_class: statusClass, auth, protocol });
    const seconds = (performance.now() - ex.started) / 1000;
    if (!metrics.requestDuration.observe(durationKey, seconds)) metrics.requestDuration.add(durationKey, { route, method }, seconds);
    // A gRPC refusal is an HTTP 200 with its problem code behind it: counted by that code all the same.
    if (status >= 400 || route === 'tokens' || ex.problem !== undefined) countOutcome(metrics, ex, path, route, status);
    const grpcStatus = recordedGrpcStatus(ex.res);
    if (grpcStatus !== undefined) {
      const key = grpcKeys.at(route, grpcStatus).key;
      let child = grpcCalls.get(key);
      if (child === undefined) grpcCalls.set(key, (child = metrics.grpcCalls.labels({ route, grpc_status: grpcStatus })));
      child.inc();
    }
    if (ex.forwardAuth) metrics.forwardAuthAnswers.inc({ status: String(status) });
  };
}

/** The protocol label: `http/1.0`, `http/1.1` or `h2` (as ALPN names them). */
function protocolOf(ex: Exchange): string {
  const req = ex.req;
  if (req.httpVersionMajor === 2) return 'h2';
  return req.httpVersionMinor === 0 ? 'http/1.0' : 'http/1.1';
}

const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

function routeLabel(ex: Exchange, path: string, routeOf: (path: string) => string | undefined): string {
  if (ex.route) return ex.route.path;
  if (path === '') return 'none';
  if (path === '/v1/tokens' || path.startsWith('/v1/tokens/')) return 'tokens';
  return OWN_PATHS[path] ?? routeOf(path) ?? 'none';
}

function countOutcome(metrics: Metrics, ex: Exchange, path: string, route: string, status: number): void {
  const code = ex.problem;
  if (code !== undefined) metrics.refusals.inc({ code });
  const operation = ex.method === 'POST' ? TOKEN_OPERATIONS[path] : undefined;
  if (operation) metrics.tokenOperations.inc({ operation, outcome: status < 400 ? 'ok' : code ?? `http_${status}` });
  if (code === 'too_many_attempts') {
    const endpoint: LockoutEndpoint = route === 'tokens' ? 'create' : 'basic';
    metrics.lockouts.inc({ endpoint });
  } else if (code === 'rate_limited') {
    metrics.rateLimited.inc({ route });
  } else if (code === 'forbidden') {
    metrics.forbidden.inc({ route });
  }
  // Upstream errors are counted by the Forwarder, which knows refused from reset and sees retried attempts.
}

/**
 * The series key of a set of label values, found label by label (one Map lookup each, by strings whose
 * hashes are known: the route's path, method names, constants) instead of building a new string per
 * request and hashing it. Each node is the key of the values on the way to it; `at(a, b)` goes two
 * labels further.
 */
class SeriesKeys {
  private readonly next = new Map<string, Map<string, SeriesKeys>>();

  constructor(readonly key: string) {}

  at(a: string, b: string): SeriesKeys {
    let byA = this.next.get(a);
    if (byA === undefined) this.next.set(a, (byA = new Map()));
    let node = byA.get(b);
    if (node === undefined) {
      const prefix = this.key === '' ? a : `${this.key}\0${a}`;
      byA.set(b, (node = new SeriesKeys(b === '' ? prefix : `${prefix}\0${b}`)));
    }
    return node;
  }
}
