import { request as httpRequest, ServerResponse, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type Koa from 'koa';
import { authenticate } from '../auth/authenticate.js';
import { parseAuthorization } from '../auth/authorization-header.js';
import type { Config, UpstreamConfig } from '../config/types.js';
import type { PasswordCheck } from '../credentials/password-check.js';
import { toProblem } from '../http/errors.js';
import { HttpProblem } from '../http/problem.js';
import { requestForm } from '../http/request-form.js';
import { requestId } from '../http/request-id.js';
import type { GatewayContext, GatewayMiddleware, GatewayState } from '../http/state.js';
import type { Logger } from '../log.js';
import type { TokenService } from '../tokens/service.js';
import type { RateBuckets } from '../counters/types.js';
import type { SessionStore } from '../tokens/store/types.js';
import { matchRoute } from './gateway-routes.js';
import { prepareUpstreamHeaders } from './headers.js';
import { rateLimit } from './rate-limit.js';
import { destroySoon, headerBlock, writeProblem } from './raw-response.js';
import type { RouteTable } from './route-table.js';
import { Tunnels, type TunnelOwner } from './tunnels.js';
import { takeBearerProtocol } from './websocket-protocol.js';

export interface WebSocketDeps {
  server: Server;
  app: Koa<GatewayState>;
  passwords: PasswordCheck;
  tokens: TokenService;
  store: SessionStore;
  counters: RateBuckets;
  routes: RouteTable;
  credentialVersion(user: string): string | undefined;
  /** The open-tunnels gauge: +1 when a tunnel to `upstream` opens, -1 when it ends. */
  countTunnel?(upstream: string, delta: 1 | -1): void;
  log: Logger;
}

/** Response headers of an upstream's refusal that describe the hop, not the message. */
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

/**
 * The server's `upgrade` listener. A WebSocket handshake goes through the same steps as any request
 * (request id, canonical path, authentication, route, rate limit; the same middleware, run on a Koa
 * context of its own), then to the route's upstream with the same identity and forwarding headers; the
 * upstream's 101 starts a tunnel (see Tunnels). Every refusal is a problem response written on the raw
 * socket, which is then closed. Other upgrades (h2c) are served as plain HTTP/1.1 requests.
 */
export class WebSocketProxy {
  private readonly tunnels: Tunnels;
  /** Each upstream's target URLs, taken in turn (a handshake is one request; the pool's health is the Forwarder's). */
  private targets = new Map<string, { config: UpstreamConfig; urls: URL[]; next: number }>();
  private trustForwarded = false;
  private access = false;
  private closing = false;

  private deps!: WebSocketDeps;
  private chain: GatewayMiddleware[] = [];

  constructor(config: Config, deps: WebSocketDeps) {
    this.configure(config, deps);
    // Read through this.deps at call time: a reload swaps them, open tunnels stay.
    this.tunnels = new Tunnels({
      onRevoked: (listener) => this.deps.store.onRevoked(listener),
      verifyToken: (token) => this.deps.tokens.verifyAccessToken(token),
      credentialVersion: (user) => this.deps.credentialVersion(user),
      counted: (upstream, delta) => this.deps.countTunnel?.(upstream, delta),
    }, deps.log, config.log.access);
  }

  /** Takes a (re)loaded configuration: new handshakes follow it, open tunnels run on. */
  configure(config: Config, deps: WebSocketDeps): void {
    this.deps = deps;
    // A new map, not the old one cleared: a handshake under way keeps the targets it started with.
    this.targets = new Map(Object.entries(config.upstreams).map(([name, u]) => [name, { config: u, urls: u.targets.map((t) => new URL(t)), next: 0 }]));
    this.trustForwarded = config.server.trustProxy > 0;
    this.access = config.log.access;
    this.chain = [
      requestId(),
      requestForm(),
      this.refuseWhileClosing,
      bearerFromSubprotocol,
      authenticate(deps.passwords, deps.tokens),
      matchRoute(deps.routes),
      allowWebSocket,
      allowOrigin,
      rateLimit(deps.counters),
    ];
  }

  /** For `server.on('upgrade', …)`: never throws, never leaves the socket open on an error. */
  readonly upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', () => socket.destroy());
    const handling = isWebSocket(req) ? this.handle(req, socket, head) : this.servePlain(req, socket, head);
    handling.catch((err: unknown) => {
      const problem = toProblem(err);
      // Expected refusals (the store down: 503) are logged where they arise, once per outage.
      if (problem.code === 'internal_error') this.deps.log.error('upgrade failed', { error: err instanceof Error ? err.message : String(err) });
      writeProblem(socket, problem);
    });
  };

  /** Refuses new upgrades, lets open tunnels run until graceMs, then ends them. */
  async close(graceMs: number): Promise<void> {
    this.closing = true;
    await this.tunnels.drain(graceMs);
    this.tunnels.stop();
  }

  private async handle(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    // A response object only to collect what the middleware sets (X-Request-Id, RateLimit-*): never sent.
    const collector = new ServerResponse(req);
    const ctx = this.deps.app.createContext(req, collector);
    // What this handshake started with: a reload while it is authenticated must not take its upstream away.
    const { chain, targets, trustForwarded, access } = this;
    try {
      if (req.method !== 'GET') throw new HttpProblem(400, 'invalid_request', 'a WebSocket handshake is a GET request');
      let passed = false;
      await run([...chain, async () => void (passed = true)], ctx);
      if (!passed) throw new HttpProblem(404, 'not_found', 'no WebSocket here');
    } catch (err) {
      const problem = toProblem(err);
      if (problem.code === 'internal_error') this.deps.log.error('upgrade failed', { requestId: ctx.state.requestId, error: String(err) });
      // The access line of a refused handshake (a tunnel's is written when it ends).
      if (access) {
        this.deps.log.info('request', {
          requestId: ctx.state.requestId, method: req.method, path: ctx.path, status: problem.status, websocket: true,
          user: ctx.state.principal?.user, via: ctx.state.principal?.via,
        });
      }
      writeProblem(socket, problem, collector.getHeaders());
      return;
    }
    const owner = await this.owner(ctx);
    this.forward(ctx, socket, head, owner, collector.getHeaders(), targets.get(ctx.state.route!.upstream)!, trustForwarded);
  }

  /** Who the tunnel belongs to; a bearer token's session and expiry (answered from the token caches). */
  private async owner(ctx: GatewayContext): Promise<TunnelOwner> {
    const { user, via } = ctx.state.principal!;
    if (via === 'basic') return { user, via, uv: this.deps.credentialVersion(user) };
    const parsed = parseAuthorization(ctx.req.headers.authorization!);
    const token = parsed.ok && parsed.credentials.scheme === 'bearer' ? parsed.credentials.token : '';
    const { sid, exp } = await this.deps.tokens.verifyAccessToken(token);
    return { user, via, sid, exp, token };
  }

  private forward(
    ctx: GatewayContext, socket: Duplex, head: Buffer, owner: TunnelOwner, gatewayHeaders: OutgoingHttpHeaders,
    pool: { config: UpstreamConfig; urls: URL[]; next: number }, trustForwarded: boolean,
  ): void {
    const req = ctx.req;
    // The client left while it was being authenticated: nothing to open.
    if (socket.destroyed) return;
    const route = ctx.state.route!;
    const target = { url: pool.urls[pool.next++ % pool.urls.length]!, timeoutMs: route.timeouts.responseMs };
    // The same path rules as any forwarded request: stripPrefix joins the rest onto the upstream's path.
    const path = route.stripPrefix ? ctx.path.slice(route.path.length) || '/' : ctx.path;
    req.url = ctx.querystring ? `${path}?${ctx.querystring}` : path;
    prepareUpstreamHeaders(req, {
      principal: ctx.state.principal!,
      requestId: ctx.state.requestId,
      forwardAuthorization: route.forwardAuthorization,
      allowHeaders: route.allowHeaders,
      trustForwarded,
    });
    // Hop-by-hop headers were removed with the rest; the upgrade itself is what this hop is for.
    req.headers.connection = 'Upgrade';
    req.headers.upgrade = 'websocket';
    if (!pool.config.preserveHost) req.headers.host = target.url.host;
    const send = target.url.protocol === 'https:' ? httpsRequest : httpRequest;
    const upstreamReq = send({
      hostname: target.url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: target.url.port || undefined,
      path: target.url.pathname.replace(/\/$/, '') + req.url,
      method: 'GET',
      headers: req.headers,
      agent: false,
    });
    let settled = false;
    const refuse = (status: 502 | 504) => {
      clearTimeout(timer);
      upstreamReq.destroy();
      if (settled) return;
      settled = true;
      const detail = status === 504
        ? `the ${route.upstream} service did not answer the WebSocket handshake within ${target.timeoutMs} ms`
        : `the ${route.upstream} service is unavailable`;
      writeProblem(socket, new HttpProblem(status, status === 504 ? 'gateway_timeout' : 'bad_gateway', detail), gatewayHeaders);
    };
    const timer = setTimeout(() => refuse(504), target.timeoutMs);
    const onClientGone = () => {
      clearTimeout(timer);
      upstreamReq.destroy();
    };
    socket.once('close', onClientGone);
    upstreamReq.on('error', (err) => {
      this.deps.log.warn('upstream failed', { upstream: route.upstream, status: 502, error: (err as NodeJS.ErrnoException).code ?? err.message, websocket: true });
      refuse(502);
    });
    upstreamReq.on('upgrade', (res: IncomingMessage, upstream: Socket, upstreamHead: Buffer) => {
      clearTimeout(timer);
      socket.off('close', onClientGone);
      upstream.on('error', () => upstream.destroy());
      if (settled) {
        upstream.destroy();
        return;
      }
      settled = true;
      if (this.closing || socket.destroyed || !socket.writable) {
        upstream.destroy();
        if (this.closing) writeProblem(socket, shuttingDown(), gatewayHeaders);
        else socket.destroy();
        return;
      }
      socket.write(headerBlock(101, [...pairs(res.rawHeaders), ...pairs(flatten(gatewayHeaders))]));
      if (upstreamHead.length > 0) socket.write(upstreamHead);
      if (head.length > 0) upstream.write(head);
      (socket as Socket).setNoDelay?.(true);
      upstream.setNoDelay(true);
      this.tunnels.add(socket, upstream, owner, { requestId: ctx.state.requestId, path: ctx.path, upstream: route.upstream });
    });
    // The upstream answered without switching (401, 404, 426…): the client gets that answer, then the end.
    upstreamReq.on('response', (res) => {
      if (settled) {
        res.destroy();
        return;
      }
      settled = true;
      this.relayRefusal(res, socket, upstreamReq, timer, gatewayHeaders);
    });
    upstreamReq.end();
  }

  private relayRefusal(res: IncomingMessage, socket: Duplex, upstreamReq: ClientRequest, timer: NodeJS.Timeout, gatewayHeaders: OutgoingHttpHeaders): void {
    clearTimeout(timer);
    const headers = pairs(res.rawHeaders).filter(([name]) => !HOP.has(name.toLowerCase()));
    socket.write(headerBlock(res.statusCode ?? 502, [...headers, ...pairs(flatten(gatewayHeaders)), ['Connection', 'close']]));
    res.on('error', () => socket.destroy());
    res.on('end', () => {
      socket.end();
      destroySoon(socket);
    });
    socket.once('close', () => upstreamReq.destroy());
    res.pipe(socket, { end: false });
  }

  /**
   * With an `upgrade` listener, Node hands every Upgrade request here, h2c offers (curl --http2) too.
   * Those are served as the plain HTTP/1.1 requests they also are, on a connection closed afterwards;
   * one with a body cannot be (Node stopped parsing at the headers), so it is refused.
   */
  private async servePlain(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const declaresBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (declaresBody || head.length > 0) {
      writeProblem(socket, new HttpProblem(400, 'invalid_request', `Upgrade: ${req.headers.upgrade} is not supported; send the request without Upgrade`));
      return;
    }
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket as Socket);
    // The socket stays assigned until it closes, so the response's 'close' fires (the proxy waits for it).
    res.once('finish', () => {
      socket.end();
      destroySoon(socket);
    });
    res.once('close', () => socket.destroy());
    // Node took its own drain listener off the socket with the upgrade: without this relay a response
    // larger than the socket's buffer would wait for a 'drain' that never comes.
    socket.on('drain', () => {
      if (!res.writableFinished) res.emit('drain');
    });
    if (!req.complete) req.push(null);
    this.deps.server.emit('request', req, res);
  }

  private readonly refuseWhileClosing: GatewayMiddleware = async (_ctx, next) => {
    if (this.closing) throw shuttingDown();
    await next();
  };
}

/** Browsers send the token as a subprotocol entry: it becomes the request's Authorization for the steps after. */
const bearerFromSubprotocol: GatewayMiddleware = async (ctx, next) => {
  const offered = takeBearerProtocol(ctx.req.headers['sec-websocket-protocol']);
  if (offered.kind === 'invalid') throw new HttpProblem(400, 'invalid_request', offered.reason);
  if (offered.kind === 'token') {
    if (ctx.req.headers.authorization !== undefined) {
      throw new HttpProblem(400, 'invalid_request', 'the handshake carries both an Authorization header and a bearer subprotocol entry');
    }
    ctx.req.headers.authorization = `Bearer ${offered.token}`;
    ctx.req.headers['sec-websocket-protocol'] = offered.rest.join(', ');
  }
  await next();
};

const allowWebSocket: GatewayMiddleware = async (ctx, next) => {
  if (!ctx.state.route!.websocket) {
    throw new HttpProblem(403, 'websocket_not_allowed', `the route ${ctx.state.route!.path} does not accept WebSocket connections`);
  }
  await next();
};

/**
 * Browsers send Origin on a WebSocket handshake and apply no CORS to it: on a route with a cors block,
 * a listed origin (or none: not a browser) is required, so another site's page cannot open a tunnel
 * with the credentials the browser holds for the gateway.
 */
const allowOrigin: GatewayMiddleware = async (ctx, next) => {
  const policy = ctx.state.route!.cors;
  const origin = ctx.get('origin');
  if (policy && origin !== '' && policy.origins !== '*' && !policy.origins.includes(origin)) {
    throw new HttpProblem(403, 'cors_not_allowed', 'this origin may not open a WebSocket here');
  }
  await next();
};

function shuttingDown(): HttpProblem {
  return new HttpProblem(503, 'service_unavailable', 'the gateway is shutting down', { headers: { 'Retry-After': '1' } });
}

function isWebSocket(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  return typeof upgrade === 'string' && upgrade.split(',').some((p) => p.trim().toLowerCase() === 'websocket');
}

/** Runs middleware in order, each calling the next (what koa-compose does, for one context). */
function run(chain: GatewayMiddleware[], ctx: GatewayContext): Promise<void> {
  const step = async (i: number): Promise<void> => {
    const mw = chain[i];
    if (mw) await mw(ctx, () => step(i + 1));
  };
  return step(0);
}

function pairs(raw: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i]!, raw[i + 1]!]);
  return out;
}

function flatten(headers: OutgoingHttpHeaders): string[] {
  const out: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.push(name, String(v));
  }
  return out;
}
