import { Agent, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { parse as parseUrl, type Url } from 'node:url';
import httpProxy from 'http-proxy';
import type { UpstreamConfig } from '../config/types.js';
import { problemBody, PROBLEM_CONTENT_TYPE } from '../http/problem.js';
import type { Logger } from '../log.js';
import { removeHopByHop } from './headers.js';

/** Below Node's default server keep-alive timeout (5 s), so a pooled socket is never reused as the upstream closes it. */
const AGENT_IDLE_MS = 4000;

interface Upstream {
  name: string;
  /** Parsed once (legacy Url: http-proxy reads its `path`), or http-proxy parses the string per request. */
  target: Url;
  agent: Agent;
  timeoutMs: number;
}

/** The state of one forwarded request, found again from http-proxy's events. */
interface Exchange {
  upstream: Upstream;
  proxyReq?: ClientRequest;
  timer?: NodeJS.Timeout;
  timedOut: boolean;
}

/**
 * Streams requests to upstreams with http-proxy over one keep-alive agent per upstream. Upstream
 * refused/reset → 502, no response headers within timeoutMs → 504 (problem bodies); a failure after the
 * response started cuts the stream; a client that leaves tears the upstream request down.
 */
export class Forwarder {
  private readonly proxy = httpProxy.createProxyServer({ changeOrigin: true, xfwd: false, ws: false });
  private readonly upstreams = new Map<string, Upstream>();
  private readonly exchanges = new WeakMap<IncomingMessage, Exchange>();

  constructor(upstreams: Record<string, UpstreamConfig>, private readonly log: Logger) {
    // Of http-proxy's incoming passes only `stream` (open the upstream request, pipe the body) runs.
    // The others rewrite what the gateway decides itself, and `deleteLength` did it wrongly: for a
    // DELETE or OPTIONS without Content-Length it declared `content-length: 0` and dropped
    // Transfer-Encoding, yet still piped the de-chunked body, which the upstream then read as a second
    // request on the pooled connection (request smuggling past authentication). Framing is left as
    // Node's parser read it: chunked stays chunked, a length stays that length, none means no body.
    const passes = (this.proxy as unknown as { webPasses: Array<{ name: string }> }).webPasses;
    passes.splice(0, passes.length, ...passes.filter((pass) => pass.name === 'stream'));
    for (const [name, u] of Object.entries(upstreams)) {
      const options = { keepAlive: true, timeout: AGENT_IDLE_MS, scheduling: 'lifo' as const };
      const agent = u.url.startsWith('https:') ? new HttpsAgent(options) : new Agent(options);
      this.upstreams.set(name, { name, target: parseUrl(u.url), agent, timeoutMs: u.timeoutMs });
    }
    this.proxy.on('proxyReq', (proxyReq, req) => {
      const exchange = this.exchanges.get(req);
      if (!exchange) return;
      exchange.proxyReq = proxyReq;
      // Timed out while waiting for a socket: the client already has its 504.
      if (exchange.timedOut) proxyReq.destroy();
    });
    this.proxy.on('proxyRes', (proxyRes, req, res) => this.onResponse(proxyRes, req, res));
    // Without an 'error' listener http-proxy throws and kills the process; errors go to the per-call callback.
    this.proxy.on('error', (err) => this.log.warn('proxy error', { error: err.message }));
    this.proxy.on('econnreset', () => {});
  }

  /** Forwards req (url and headers already rewritten); settles when the response is done or the client left. */
  forward(req: IncomingMessage, res: ServerResponse, upstreamName: string): Promise<void> {
    const upstream = this.upstreams.get(upstreamName)!;
    const exchange: Exchange = { upstream, timedOut: false };
    this.exchanges.set(req, exchange);
    return new Promise((resolve) => {
      exchange.timer = setTimeout(() => this.onTimeout(exchange, res), upstream.timeoutMs);
      res.once('close', () => {
        clearTimeout(exchange.timer);
        // The client left before the response finished: stop the upstream working for nobody.
        if (!res.writableFinished) exchange.proxyReq?.destroy();
        resolve();
      });
      this.proxy.web(req, res, { target: upstream.target, agent: upstream.agent }, (err) => this.onError(err, exchange, res));
    });
  }

  close(): void {
    for (const u of this.upstreams.values()) u.agent.destroy();
    this.proxy.close();
  }

  private onResponse(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse): void {
    const exchange = this.exchanges.get(req);
    if (exchange) clearTimeout(exchange.timer);
    removeHopByHop(proxyRes.headers);
    // Framing of the client connection is the gateway's business, not the upstream's.
    proxyRes.headers.connection = res.shouldKeepAlive ? 'keep-alive' : 'close';
    // A body that stalls for timeoutMs is cut, so a stuck upstream cannot hold the client forever.
    const idle = setTimeout(() => proxyRes.destroy(), exchange?.upstream.timeoutMs ?? 10_000);
    proxyRes.on('data', () => idle.refresh());
    // An upstream that dies (or is cut) mid-body must not leave the client waiting for the rest.
    proxyRes.once('close', () => {
      clearTimeout(idle);
      if (!proxyRes.complete) res.destroy();
    });
  }

  private onTimeout(exchange: Exchange, res: ServerResponse): void {
    exchange.timedOut = true;
    if (exchange.proxyReq) exchange.proxyReq.destroy();
    else this.fail(res, 504, exchange.upstream);
  }

  private onError(err: Error, exchange: Exchange, res: ServerResponse): void {
    clearTimeout(exchange.timer);
    const status = exchange.timedOut ? 504 : 502;
    this.log.warn('upstream failed', { upstream: exchange.upstream.name, status, error: (err as NodeJS.ErrnoException).code ?? err.message });
    this.fail(res, status, exchange.upstream);
  }

  private fail(res: ServerResponse, status: 502 | 504, upstream: Upstream): void {
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    const body = status === 504
      ? problemBody(504, 'gateway_timeout', `the ${upstream.name} service did not answer within ${upstream.timeoutMs} ms`)
      : problemBody(502, 'bad_gateway', `the ${upstream.name} service is unavailable`);
    const json = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': PROBLEM_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(json) });
    res.end(json);
  }
}
