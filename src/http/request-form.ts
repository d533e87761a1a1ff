import type { IncomingMessage } from 'node:http';
import { isValidHost } from '../core/headers.js';
import { pendingBytes, takeBearerProtocol } from '../proxy/websocket-protocol.js';
import { normalizePath } from '../core/path.js';
import { HttpProblem } from './problem.js';
import type { Exchange } from '../core/exchange.js';

/** Methods the gateway never forwards: TRACE reflects headers (credentials included), CONNECT opens tunnels. */
const REFUSED_METHODS = new Set(['TRACE', 'CONNECT']);
const ALLOW = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

/**
 * The request line and headers, checked once before anything else looks at the request: an origin-form
 * target, a method the gateway forwards, exactly one well-formed Host (RFC 9112 section 3.2), and the
 * one normalized spelling of the path, which every later step (own endpoints, routing, forwarding) sees.
 * It picks the hand-off: a WebSocket handshake (RFC 6455 section 4.1: a GET without a body) is
 * tunnelled, anything else forwarded. rawHeaders are scanned once, here.
 */
export function requestForm(ex: Exchange): void {
  const req = ex.req;
  if (REFUSED_METHODS.has(req.method!)) {
    throw new HttpProblem(405, 'method_not_allowed', `${req.method} is not served by the gateway`, { headers: { Allow: ALLOW } });
  }
  // Only origin-form targets (`/path?query`): Koa cannot even parse some absolute-form ones.
  if (!req.url?.startsWith('/')) throw new HttpProblem(400, 'invalid_path', 'the request target must be a path starting with /');
  const raw = req.rawHeaders;
  let hosts = 0;
  let authorizations = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++;
    else if (name.length === 13 && name.toLowerCase() === 'authorization') authorizations++;
  }
  if (req.httpVersionMajor === 2) hosts = authorityAsHost(req, hosts);
  checkHost(hosts, req.headers.host, req.httpVersionMajor === 1 && req.httpVersionMinor === 0);
  if (authorizations > 1) ex.repeatedAuthorization = true;
  const normalized = normalizePath(ex.path);
  if (normalized !== ex.path) {
    ex.path = normalized;
    // The gateway's own endpoints (Koa) read the target from the request.
    req.url = ex.target;
  }
  if ((req as { upgrade?: boolean }).upgrade === true) ex.handOff = upgradeForm(req);
}

/**
 * A request Node handed over as an upgrade. A WebSocket handshake is a GET without a body (its
 * bytes after the head are the client's first frames); its bearer token may come as a subprotocol
 * entry (browsers cannot set Authorization). Other upgrades (h2c) are served as the plain requests they
 * also are, without a body: Node stopped parsing at the head.
 */
function upgradeForm(req: IncomingMessage): 'tunnel' | 'forward' {
  const declaresBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (!isWebSocket(req)) {
    if (declaresBody || pendingBytes(req) > 0) {
      throw new HttpProblem(400, 'invalid_request', `Upgrade: ${req.headers.upgrade} is not supported; send the request without Upgrade`);
    }
    return 'forward';
  }
  if (req.method !== 'GET') throw new HttpProblem(400, 'invalid_request', 'a WebSocket handshake is a GET request');
  if (declaresBody) throw new HttpProblem(400, 'invalid_request', 'a WebSocket handshake carries no body (Content-Length or Transfer-Encoding)');
  const offered = takeBearerProtocol(req.headers['sec-websocket-protocol']);
  if (offered.kind === 'invalid') throw new HttpProblem(400, 'invalid_request', offered.reason);
  if (offered.kind === 'token') {
    if (req.headers.authorization !== undefined) {
      throw new HttpProblem(400, 'invalid_request', 'the handshake carries both an Authorization header and a bearer subprotocol entry');
    }
    req.headers.authorization = `Bearer ${offered.token}`;
    if (offered.rest.length > 0) req.headers['sec-websocket-protocol'] = offered.rest.join(', ');
    else delete req.headers['sec-websocket-protocol'];
  }
  return 'tunnel';
}

function isWebSocket(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  return typeof upgrade === 'string' && upgrade.split(',').some((p) => p.trim().toLowerCase() === 'websocket');
}

/**
 * An HTTP/2 request names its host in `:authority` (RFC 9113 section 8.3.1); a Host beside it must say
 * the same. From here on it is the request's Host: for routing, X-Forwarded-Host and the identity headers.
 */
function authorityAsHost(req: IncomingMessage, hosts: number): number {
  const authority = req.headers[':authority'];
  if (typeof authority !== 'string') return hosts;
  if (hosts > 0) {
    if (req.headers.host !== authority) throw new HttpProblem(400, 'invalid_request', 'the Host header differs from :authority');
    return hosts;
  }
  req.headers.host = authority;
  return 1;
}

function checkHost(count: number, host: string | undefined, http10: boolean): void {
  if (count > 1) throw new HttpProblem(400, 'invalid_request', 'the request carries more than one Host header');
  if (host === undefined) {
    if (!http10) throw new HttpProblem(400, 'invalid_request', 'an HTTP/1.1 request needs a Host header');
    return;
  }
  // A connection's requests name the same host again and again: the last one found valid is not checked again.
  if (host === lastValidHost) return;
  if (!isValidHost(host)) throw new HttpProblem(400, 'invalid_request', 'the Host header is not a valid host[:port]');
  lastValidHost = host;
}

let lastValidHost: string | undefined;

/**
 * `/v1/tokens` as its own segment, in any case, each of the two segments with optional `;` parameters
 * (also `%3B`) and with the trailing dots and spaces IIS and ASP.NET drop (`/v1/tokens./create`).
 */
const TOKEN_PATH = /^\/v1(?:\.|%20|%0[9a-d]|%c2%85|%c2%a0)*(?:(?:;|%3b)[^/]*)?\/tokens(?:\.|%20|%0[9a-d]|%c2%85|%c2%a0)*(?:(?:;|%3b)[^/]*)?(?:\/|$)/i;

/**
 * Whether a (normalized) path is `/v1/tokens` or below it however it is spelled: in any case, and with
 * `;` parameters (also percent-encoded) on a segment. Such a path is answered by the gateway or
 * refused, never forwarded, whatever the routes.
 */
export function isTokenPath(path: string): boolean {
  return TOKEN_PATH.test(path);
}
