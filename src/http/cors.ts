import type { ServerResponse } from 'node:http';
import type { CorsPolicy } from '../config/types.js';
import type { RouteTable } from '../routes/route-table.js';
import { HttpProblem } from './problem.js';
import type { GatewayContext, GatewayExchange } from './state.js';

const TOKENS_PREFIX = '/v1/tokens';

interface Guard {
  own: Record<string, string>;
  vary: string[];
}

/** The CORS headers each response will carry, read when its head is written. */
const guards = new WeakMap<ServerResponse, Guard>();

/**
 * CORS of the token endpoints (`tokens.cors`) and of each route (`routes[].cors`), as part of the
 * own-endpoint lookup, before authentication: a browser's preflight (OPTIONS with Origin and
 * Access-Control-Request-Method) carries no credentials, so it is the gateway's own to answer (204, or
 * 403 cors_not_allowed) and never reaches authentication or an upstream. Other requests from a listed
 * origin get the Allow-Origin headers on whatever the answer is (401s and upstream responses too), so
 * the page can read it; an unlisted origin gets none. Where a policy applies it is the only one: CORS
 * headers an upstream sends are replaced by the gateway's. Paths without a policy are left alone.
 *
 * Returns the preflight's handler when the request is one, else undefined (the guard is installed).
 */
export function corsLookup(routes: RouteTable, tokens: CorsPolicy | undefined): (ex: GatewayExchange) => OwnHandler | undefined {
  // Nothing configured: no route lookup per request (the route is matched once, after authentication).
  if (!tokens && !routes.anyCors) return () => undefined;
  return function applyCors(ex) {
    const path = ex.path;
    const underTokens = path === TOKENS_PREFIX || path.startsWith(`${TOKENS_PREFIX}/`);
    const policy = underTokens ? tokens : routes.match(path)?.cors;
    return policy ? withPolicy(ex, policy) : undefined;
  };
}

/** A handler the own-endpoint lookup found: it answers the request itself. */
export type OwnHandler = (ctx: GatewayContext) => void | Promise<void>;

function withPolicy(ex: GatewayExchange, policy: CorsPolicy): OwnHandler | undefined {
  const origin = headerValue(ex, 'origin');
  const listed = origin !== '' && (policy.origins === '*' || policy.origins.includes(origin));
  const requestedMethod = headerValue(ex, 'access-control-request-method');
  if (ex.method === 'OPTIONS' && origin !== '' && requestedMethod !== '') return (c) => preflight(c, policy, origin, listed, requestedMethod);
  // A gRPC-Web call's page reads its status from these when the answer has no body (trailers-only).
  const exposed = isGrpcWeb(ex) ? [...policy.exposedHeaders, 'grpc-status', 'grpc-message'] : policy.exposedHeaders;
  guardCorsHeaders(ex.res, listed ? {
    ...allowOrigin(policy, origin),
    ...(exposed.length > 0 ? { 'Access-Control-Expose-Headers': exposed.join(', ') } : {}),
  } : {}, ['Origin']);
  return undefined;
}

function isGrpcWeb(ex: GatewayExchange): boolean {
  const type = ex.req.headers['content-type'];
  return typeof type === 'string' && type.toLowerCase().startsWith('application/grpc-web');
}

/** A request header's value as Koa's ctx.get reads it ('' when absent). */
function headerValue(ex: GatewayExchange, name: 'origin' | 'access-control-request-method'): string {
  return ex.req.headers[name] ?? '';
}

function preflight(ctx: GatewayContext, policy: CorsPolicy, origin: string, listed: boolean, requestedMethod: string): void {
  guardCorsHeaders(ctx.res, {}, ['Origin', 'Access-Control-Request-Method', 'Access-Control-Request-Headers']);
  if (!listed) throw new HttpProblem(403, 'cors_not_allowed', 'this origin may not call this path');
  if (!policy.methods.includes(requestedMethod)) {
    throw new HttpProblem(403, 'cors_not_allowed', `the method may not be used cross-origin here (allowed: ${policy.methods.join(', ')})`);
  }
  const refused = ctx.get('access-control-request-headers').split(',').map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '' && !policy.headers.includes(h));
  if (refused.length > 0) {
    throw new HttpProblem(403, 'cors_not_allowed', `request headers not allowed cross-origin here: ${refused.join(', ')}`);
  }
  guardCorsHeaders(ctx.res, {
    ...allowOrigin(policy, origin),
    'Access-Control-Allow-Methods': policy.methods.join(', '),
    ...(policy.headers.length > 0 ? { 'Access-Control-Allow-Headers': policy.headers.join(', ') } : {}),
    'Access-Control-Max-Age': String(policy.maxAgeSeconds),
  }, ['Origin', 'Access-Control-Request-Method', 'Access-Control-Request-Headers']);
  ctx.status = 204;
}

function allowOrigin(policy: CorsPolicy, origin: string): Record<string, string> {
  const headers: Record<string, string> = { 'Access-Control-Allow-Origin': policy.origins === '*' ? '*' : origin };
  if (policy.credentials) headers['Access-Control-Allow-Credentials'] = 'true';
  return headers;
}

/**
 * Makes `own` the response's only Access-Control-* headers and puts `vary` into Vary, at the moment the
 * head is written, whoever writes it (Koa, the error handler, the proxy copying upstream headers).
 * Calling it again replaces the previous `own`.
 */
function guardCorsHeaders(res: ServerResponse, own: Record<string, string>, vary: string[]): void {
  const first = !guards.has(res);
  guards.set(res, { own, vary });
  if (!first) return;
  const writeHead = res.writeHead;
  res.writeHead = function writeHeadWithCors(this: ServerResponse, ...args: unknown[]) {
    const { own: headers, vary: varyOn } = guards.get(this)!;
    for (const name of this.getHeaderNames()) if (name.startsWith('access-control-')) this.removeHeader(name);
    // Headers handed to writeHead itself (rather than set before) take part too.
    const last = args[args.length - 1];
    if (args.length > 1 && last && typeof last === 'object' && !Array.isArray(last)) {
      const passed = { ...(last as Record<string, unknown>) };
      for (const name of Object.keys(passed)) {
        if (name.toLowerCase().startsWith('access-control-')) delete passed[name];
        else if (name.toLowerCase() === 'vary') {
          this.setHeader('Vary', String(passed[name]));
          delete passed[name];
        }
      }
      args[args.length - 1] = passed;
    }
    for (const [name, value] of Object.entries(headers)) this.setHeader(name, value);
    this.setHeader('Vary', mergeVary(this.getHeader('vary'), varyOn));
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as typeof res.writeHead;
}

function mergeVary(current: unknown, add: string[]): string {
  const list = (Array.isArray(current) ? current.join(',') : current === undefined ? '' : String(current))
    .split(',').map((v) => v.trim()).filter(Boolean);
  if (list.includes('*')) return '*';
  const seen = new Set(list.map((v) => v.toLowerCase()));
  for (const v of add) if (!seen.has(v.toLowerCase())) list.push(v);
  return list.join(', ');
}
