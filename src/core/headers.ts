import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Principal } from './principal.js';
import { REMOVED_HEADERS, removedNames } from './header-table.js';

/**
 * Hop-by-hop headers (RFC 9110 section 7.6.1): never forwarded, either way. Transfer-Encoding and
 * Content-Length are not among them: they are the framing Node's parser read, passed on unchanged
 * so the upstream reads exactly the bytes that are sent (see Forwarder).
 */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate'];
/** Request-target and method override headers: removed before forwarding unless a route allows one (REMOVED_HEADERS). */
export const OVERRIDE_HEADERS = removedNames('override');
/**
 * Identity headers: the gateway's own, and the names other proxies and frameworks read a user or groups
 * from. Only the gateway may set one; a client's copies are removed first (with `_` for `-` too, see
 * upstreamHeaderObject). IDENTITY_PREFIXES name whole families. Both come from REMOVED_HEADERS, the one
 * table the front-proxy recipes clear too.
 */
const IDENTITY_HEADERS = REMOVED_HEADERS.filter((h) => (h.kind === 'identity' || h.kind === 'gateway-identity') && !h.family).map((h) => h.name);
const IDENTITY_PREFIXES = REMOVED_HEADERS.filter((h) => h.family).map((h) => h.name);
/** Headers a client may never send on: identity, forwarding, and (unless a route allows one) overrides. */
const REMOVED = new Set([...IDENTITY_HEADERS, ...removedNames('forwarding'), ...OVERRIDE_HEADERS]);
/** `host[:port]`: a DNS name or IPv4 address, or an IPv6 literal in brackets. Nothing a list or URL could be built from. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$/;

export interface ForwardContext {
  principal: Principal;
  requestId: string;
  forwardAuthorization: boolean;
  /** Override headers this route lets through (lower case). */
  allowHeaders: readonly string[];
  /** Trust the client-sent X-Forwarded-* chain (a trusted proxy sits in front of the gateway). */
  trustForwarded: boolean;
  /** One more header name (lower case) only the gateway may set, in any spelling: the assertion's. */
  reserved: string | undefined;
  /**
   * A credential the gateway consumes and never forwards: the API key header (lower case, removed in
   * any spelling) and the prefix of a key sent as `Authorization: Bearer` (removed even on a route that
   * forwards Authorization). Undefined: none.
   */
  consumed?: { header: string; bearerPrefix: string };
}

const HOP_BY_HOP_SET = new Set(HOP_BY_HOP);

/**
 * The headers the upstream receives, as a new object (the request's own is left as Node parsed it; the
 * Forwarder sends this one as it is, with the target's Host): every header of the request but the hop-by-hop
 * ones (and those its Connection header names), identity, forwarding and override headers (unless the
 * route lets an override through), Expect (the gateway answers it itself, after authentication) and,
 * unless the route forwards it, Authorization; then the gateway's own: X-Authenticated-User/-Via,
 * X-Request-Id, X-Forwarded-For/-Proto/-Host. Identity headers beyond user and via are the caller's.
 */
export function upstreamHeaderObject(req: IncomingMessage, f: ForwardContext): IncomingHttpHeaders {
  const h = req.headers;
  const named = connectionNamed(h.connection);
  const out: IncomingHttpHeaders = {};
  for (const name in h) {
    if (HOP_BY_HOP_SET.has(name) || named?.has(name) || name === 'expect') continue;
    // An HTTP/2 request's pseudo-headers (`:method`, `:path`, `:authority`, `:scheme`): the upstream hop is HTTP/1.1.
    if (name.charCodeAt(0) === 0x3a) continue;
    if (name === 'authorization' && (!f.forwardAuthorization || (f.consumed !== undefined && carriesKey(h.authorization, f.consumed.bearerPrefix)))) continue;
    // CGI-style upstreams read `_` as `-`: X-Authenticated_User must not pass as X-Authenticated-User.
    const dashed = name.includes('_') ? name.replace(/_/g, '-') : name;
    if (REMOVED.has(dashed) ? !(name === dashed && f.allowHeaders.includes(name)) : isIdentityFamily(dashed)) continue;
    if (dashed === f.reserved || dashed === f.consumed?.header) continue;
    out[name] = h[name];
  }
  out['x-authenticated-user'] = headerSafe(f.principal.user);
  out['x-authenticated-via'] = f.principal.via;
  out['x-request-id'] = f.requestId;
  const forwardedFor = f.trustForwarded ? h['x-forwarded-for'] : undefined;
  const peer = req.socket.remoteAddress ?? '';
  out['x-forwarded-for'] = typeof forwardedFor === 'string' && forwardedFor ? `${forwardedFor}, ${peer}` : peer;
  out['x-forwarded-proto'] = clientScheme(req, f.trustForwarded ? h['x-forwarded-proto'] : undefined);
  const host = clientHost(req, f.trustForwarded ? h['x-forwarded-host'] : undefined);
  if (host) out['x-forwarded-host'] = host;
  return out;
}

/** An Authorization header that carries a key of the prefix as its bearer credential (any case of the scheme). */
function carriesKey(authorization: string | undefined, bearerPrefix: string): boolean {
  if (authorization === undefined) return false;
  const m = /^\s*bearer\s+(\S+)/i.exec(authorization);
  return m !== null && m[1]!.startsWith(bearerPrefix);
}

/** The header names a Connection header lists (hop-by-hop by its word), but never framing or Host. */
function connectionNamed(connection: string | undefined): Set<string> | undefined {
  if (connection === undefined || connection === 'keep-alive' || connection === 'close') return undefined;
  const named = new Set<string>();
  for (const name of connection.split(',')) {
    const n = name.trim().toLowerCase();
    if (n && n !== 'host' && n !== 'transfer-encoding' && n !== 'content-length') named.add(n);
  }
  return named;
}

/** A header of one of the identity families (IDENTITY_PREFIXES); `name` is lower case with `-`. */
function isIdentityFamily(name: string): boolean {
  return IDENTITY_FAMILY.test(name);
}
const IDENTITY_FAMILY = new RegExp(`^(?:${IDENTITY_PREFIXES.join('|')})`);

/** The scheme the client used: a trusted proxy's word for it, else the connection's. */
export function clientScheme(req: IncomingMessage, forwardedProto?: unknown): 'http' | 'https' {
  if (forwardedProto === 'http' || forwardedProto === 'https') return forwardedProto;
  return (req.socket as TLSSocket).encrypted ? 'https' : 'http';
}

/**
 * The host the client addressed: a trusted proxy's X-Forwarded-Host when well-formed, else Host (which
 * the request form has already checked: it is well-formed or absent).
 */
export function clientHost(req: IncomingMessage, forwardedHost?: unknown): string | undefined {
  if (typeof forwardedHost === 'string' && isValidHost(forwardedHost)) return forwardedHost;
  return req.headers.host;
}

export function isValidHost(value: string): boolean {
  return HOST.test(value) && !value.includes('..');
}

/**
 * An upstream response's headers as the client gets them, as a new object: without the hop-by-hop ones
 * (and those its Connection header names) and without Transfer-Encoding (Node frames the client's
 * response itself: chunked for HTTP/1.1, a length or the connection's end for HTTP/1.0).
 */
export function endToEndHeaders(h: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = connectionNamed(h.connection);
  const out: IncomingHttpHeaders = {};
  for (const name in h) {
    if (HOP_BY_HOP_SET.has(name) || name === 'transfer-encoding' || named?.has(name)) continue;
    out[name] = h[name];
  }
  return out;
}

/** User names are UTF-8; header values are not: anything outside visible ASCII (and %) is percent-encoded. */
export function headerSafe(value: string): string {
  // A lone surrogate (a claim of a signed token can hold one) has no UTF-8 and would make encodeURIComponent
  // throw: it becomes U+FFFD, as a UTF-8 decoder reads it.
  return /^[\x21-\x24\x26-\x7e]+$/.test(value) ? value : encodeURIComponent(value.replace(LONE_SURROGATE, '\uFFFD'));
}

const LONE_SURROGATE_SOURCE = '[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]';
const LONE_SURROGATE = new RegExp(LONE_SURROGATE_SOURCE, 'g');
/** Not global: `test` keeps no state between calls. */
const HAS_LONE_SURROGATE = new RegExp(LONE_SURROGATE_SOURCE);

/** A name a header, a log line and an allow rule can carry: at most 256 characters, no control character, no lone surrogate. */
export function isUsableName(name: string): boolean {
  // eslint-disable-next-line no-control-regex
  return name.length <= 256 && !/[\u0000-\u001f\u007f]/.test(name) && !HAS_LONE_SURROGATE.test(name);
}

/**
 * Whether a group name from a credential (a token's claim, a certificate's OU) can be one: not empty, at
 * most 256 characters, no comma (the groups header lists them comma-separated), no control character,
 * no lone surrogate. Others are dropped by the source, never passed on.
 */
export function isGroupName(name: unknown): name is string {
  // eslint-disable-next-line no-control-regex
  return typeof name === 'string' && name !== '' && name.length <= 256 && !/[,\u0000-\u001f\u007f]/.test(name) && !HAS_LONE_SURROGATE.test(name);
}
