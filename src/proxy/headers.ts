import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Principal } from '../http/state.js';

/**
 * Hop-by-hop headers (RFC 9110 section 7.6.1): never forwarded, either way. Transfer-Encoding is left
 * to Node, which decodes the incoming framing and re-frames the outgoing message itself.
 */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate'];
/** Identity headers only the gateway may set; a client's copies are removed first. */
const IDENTITY = new Set(['x-authenticated-user', 'x-authenticated-via']);
const FORWARDING = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'forwarded', 'x-real-ip']);

export interface ForwardContext {
  principal: Principal;
  requestId: string;
  forwardAuthorization: boolean;
  /** Trust the client-sent X-Forwarded-* chain (a trusted proxy sits in front of the gateway). */
  trustForwarded: boolean;
}

/**
 * Rewrites the incoming request's headers into what the upstream receives. Done on the request itself,
 * before http-proxy copies them (its `proxyReq` event does not fire for `Expect` requests).
 */
export function prepareUpstreamHeaders(req: IncomingMessage, f: ForwardContext): void {
  const h = req.headers;
  const forwarded = {
    for: h['x-forwarded-for'],
    proto: h['x-forwarded-proto'],
    host: h['x-forwarded-host'],
  };
  removeHopByHop(h);
  for (const name of Object.keys(h)) {
    // CGI-style upstreams read `_` as `-`: X-Authenticated_User must not pass as X-Authenticated-User.
    const dashed = name.includes('_') ? name.replace(/_/g, '-') : name;
    if (IDENTITY.has(dashed) || FORWARDING.has(dashed)) delete h[name];
  }
  // The client already got its 100 Continue from the gateway.
  delete h.expect;
  if (!f.forwardAuthorization) delete h.authorization;

  h['x-authenticated-user'] = headerSafe(f.principal.user);
  h['x-authenticated-via'] = f.principal.via;
  h['x-request-id'] = f.requestId;

  const peer = req.socket.remoteAddress ?? '';
  const scheme = (req.socket as TLSSocket).encrypted ? 'https' : 'http';
  h['x-forwarded-for'] = f.trustForwarded && typeof forwarded.for === 'string' && forwarded.for ? `${forwarded.for}, ${peer}` : peer;
  h['x-forwarded-proto'] = f.trustForwarded && isProto(forwarded.proto) ? forwarded.proto : scheme;
  const host = f.trustForwarded && typeof forwarded.host === 'string' && forwarded.host ? forwarded.host : h.host;
  if (host) h['x-forwarded-host'] = host;
}

/** Removes hop-by-hop headers, including those a Connection header names. */
export function removeHopByHop(h: IncomingHttpHeaders): void {
  const connection = h.connection;
  if (typeof connection === 'string') {
    for (const name of connection.split(',')) {
      const n = name.trim().toLowerCase();
      if (n && n !== 'host' && n !== 'transfer-encoding' && n !== 'content-length') delete h[n];
    }
  }
  for (const name of HOP_BY_HOP) delete h[name];
}

/** User names are UTF-8; header values are not: anything outside visible ASCII (and %) is percent-encoded. */
export function headerSafe(value: string): string {
  return /^[\x21-\x24\x26-\x7e]+$/.test(value) ? value : encodeURIComponent(value);
}

function isProto(v: unknown): v is string {
  return v === 'http' || v === 'https';
}
