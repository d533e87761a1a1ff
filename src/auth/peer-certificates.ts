import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { PeerCertificate as NodePeerCertificate } from 'node:tls';
import type { ClientUserFrom } from '../config/types.js';
import type { Exchange } from '../core/exchange.js';
import { isGroupName } from '../core/headers.js';
import { DomainError } from '../core/domain-error.js';

/**
 * The client certificate of a request's connection, read once per connection (keep-alive requests, the
 * streams of one HTTP/2 session) and judged again only when the CRL changed since.
 */
export interface ClientCertificate {
  /** RFC 8705 §3.1 `x5t#S256`: base64url SHA-256 of the certificate's DER. */
  readonly thumbprint: string;
  /** Verified against server.tls.clientCa at the handshake, and neither revoked nor expired since. */
  verified: boolean;
  /** Why it is not verified (an OpenSSL verify code: UNABLE_TO_GET_ISSUER_CERT, CERT_REVOKED, …). */
  reason: string | undefined;
  /** Its subject's CN values, OU values (sorted, once each), and subjectAltName e-mails, URIs and DNS names, in order. */
  readonly cn: readonly string[];
  readonly ou: readonly string[];
  readonly email: readonly string[];
  readonly uri: readonly string[];
  readonly dns: readonly string[];
  /** notAfter, in ms since the epoch. */
  readonly validToMs: number;
  /** Issuer (DER, hex) and serial number (hex): what a CRL names it by. */
  readonly revocationId: string;
  /** The CRL generation it was judged under. */
  generation: number;
}

/** What a TLS socket (or an HTTP/2 session's socket proxy) offers of its peer. */
interface PeerSocket {
  getPeerCertificate?(detailed?: boolean): NodePeerCertificate | Record<string, never> | null;
  authorized?: boolean;
  authorizationError?: Error | string;
}

/**
 * The client certificates of the connections of a listener with server.tls.clientCa. The TLS layer
 * verifies them at the handshake (chain to clientCa, validity, the CRL in force); this reads the
 * verdict and the certificate once per connection, and holds the revocations of the current CRL so a
 * connection opened before a CRL change is judged again at its next request.
 */
export class ClientCertificates {
  private readonly cache = new WeakMap<object, ClientCertificate | null>();
  private revoked = new Set<string>();
  private generation = 0;

  constructor(readonly userFrom: ClientUserFrom) {}

  /** Takes the revocations of a (new) CRL file's contents; connections judged before are judged again. */
  useCrl(pem: Buffer | string | undefined): void {
    this.revoked = pem === undefined ? new Set() : revokedIds(pem);
    this.generation++;
  }

  /** Whether a certificate (by its revocationId) is revoked by the CRL in force. */
  isRevoked(revocationId: string): boolean {
    return this.revoked.has(revocationId);
  }

  /**
   * The certificate the request's connection presented, verified or not; undefined when it presented
   * none (or is not TLS). Synchronous and, after the first request of a connection, a WeakMap lookup.
   */
  of(req: IncomingMessage): ClientCertificate | undefined {
    const key = connectionOf(req);
    let cert = this.cache.get(key);
    if (cert === undefined) {
      cert = read(req.socket as PeerSocket, this.generation);
      this.cache.set(key, cert);
    }
    if (cert === null) return undefined;
    if (cert.verified && (cert.generation !== this.generation || cert.validToMs <= Date.now())) this.rejudge(cert);
    return cert;
  }

  /**
   * Why the connection of `socket` may no longer carry anything: the certificate it presented was
   * verified when it was read and is revoked or expired now (an open tunnel's check); undefined otherwise.
   */
  refusedConnection(socket: object): string | undefined {
    const cert = this.cache.get(socket);
    if (!cert) return undefined;
    if (cert.verified && (cert.generation !== this.generation || cert.validToMs <= Date.now())) this.rejudge(cert);
    if (cert.verified) return undefined;
    return cert.reason === 'CERT_REVOKED' ? 'certificate revoked' : cert.reason === 'CERT_HAS_EXPIRED' ? 'certificate expired' : `certificate not accepted (${cert.reason ?? 'not verified'})`;
  }

  /**
   * The connection check of every request: a certificate presented but not verified (server.tls.clientCerts
   * `request`: unknown CA, expired, revoked, revoked since the connection opened) is refused with 401,
   * whatever else the request carries; a verified one is recorded on the exchange.
   */
  screen(ex: Exchange): void {
    const cert = this.of(ex.req);
    if (cert === undefined) return;
    if (!cert.verified) throw refused(cert);
    ex.certificate = cert.thumbprint;
  }

  private rejudge(cert: ClientCertificate): void {
    cert.generation = this.generation;
    if (this.revoked.has(cert.revocationId)) {
      cert.verified = false;
      cert.reason = 'CERT_REVOKED';
    } else if (cert.validToMs <= Date.now()) {
      cert.verified = false;
      cert.reason = 'CERT_HAS_EXPIRED';
    }
  }
}

/** The refusal of a certificate that is not (or no longer) verified. */
export function refused(cert: ClientCertificate): DomainError {
  return new DomainError('credentials_not_accepted', `the client certificate was not accepted (${cert.reason ?? 'not verified'})`);
}

/**
 * The key of a request's connection: an HTTP/2 stream's session (its streams share one certificate),
 * else the socket.
 */
function connectionOf(req: IncomingMessage): object {
  return (req as { stream?: { session?: object } }).stream?.session ?? req.socket;
}

function read(socket: PeerSocket, generation: number): ClientCertificate | null {
  if (typeof socket.getPeerCertificate !== 'function') return null;
  const peer = socket.getPeerCertificate(false) as Partial<NodePeerCertificate> | null;
  if (!peer || !peer.raw || peer.raw.length === 0) return null;
  const id = certificateId(peer.raw);
  const error = socket.authorizationError;
  const names = subjectAltNames(peer.subjectaltname ?? '');
  return {
    thumbprint: thumbprintOf(peer.raw),
    verified: socket.authorized === true && id !== undefined,
    reason: socket.authorized === true ? (id === undefined ? 'UNREADABLE_CERTIFICATE' : undefined) : typeof error === 'string' ? error : error?.message ?? 'NOT_VERIFIED',
    cn: values(peer.subject?.CN),
    // As the groups file gives them: sorted, once each.
    // OU values that cannot be group names (a comma would split into two groups in the groups header) are dropped.
    ou: [...new Set(values(peer.subject?.OU).filter(isGroupName))].sort(),
    email: names.email,
    uri: names.uri,
    dns: names.dns,
    validToMs: peer.valid_to ? Date.parse(peer.valid_to) : 0,
    revocationId: id ?? '',
    generation,
  };
}

/** RFC 8705 §3.1: the base64url SHA-256 of the certificate's DER. */
export function thumbprintOf(der: Buffer): string {
  return createHash('sha256').update(der).digest('base64url');
}

function values(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

/**
 * Node's subjectaltname string: `DNS:a, email:b, URI:c, IP Address:…`, a value with a comma, quote or
 * other special character written as a JSON string (`DNS:"a,b"`).
 */
export function subjectAltNames(text: string): { email: string[]; uri: string[]; dns: string[] } {
  const out = { email: [] as string[], uri: [] as string[], dns: [] as string[] };
  let i = 0;
  while (i < text.length) {
    const colon = text.indexOf(':', i);
    if (colon < 0) break;
    const type = text.slice(i, colon);
    let value: string;
    let next: number;
    if (text[colon + 1] === '"') {
      let end = colon + 2;
      while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      try {
        value = JSON.parse(text.slice(colon + 1, end + 1)) as string;
      } catch {
        value = '';
      }
      next = text.indexOf(', ', end);
    } else {
      next = text.indexOf(', ', colon);
      value = text.slice(colon + 1, next < 0 ? text.length : next);
    }
    if (type === 'email') out.email.push(value);
    else if (type === 'URI') out.uri.push(value);
    else if (type === 'DNS') out.dns.push(value);
    if (next < 0) break;
    i = next + 2;
  }
  return out;
}

// ---- DER: just enough of X.509 and CRLs to name a certificate as a CRL does (issuer and serial).

interface Tlv {
  tag: number;
  /** The whole element, header included. */
  start: number;
  /** The contents. */
  body: number;
  end: number;
}

function tlv(der: Buffer, at: number, limit: number): Tlv {
  if (at + 2 > limit) throw new Error('truncated DER');
  const tag = der[at]!;
  let length = der[at + 1]!;
  let body = at + 2;
  if (length & 0x80) {
    const n = length & 0x7f;
    if (n === 0 || n > 4 || body + n > limit) throw new Error('bad DER length');
    length = der.readUIntBE(body, n);
    body += n;
  }
  const end = body + length;
  if (end > limit) throw new Error('truncated DER');
  return { tag, start: at, body, end };
}

function children(der: Buffer, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.body; at < parent.end;) {
    const child = tlv(der, at, parent.end);
    out.push(child);
    at = child.end;
  }
  return out;
}

const SEQUENCE = 0x30;
const INTEGER = 0x02;

/** A serial number as hex, upper case, without leading zero bytes. */
function serialHex(der: Buffer, integer: Tlv): string {
  let from = integer.body;
  while (from < integer.end - 1 && der[from] === 0) from++;
  return der.toString('hex', from, integer.end).toUpperCase();
}

/** `<issuer DER hex>/<serial hex>` of a certificate's DER; undefined when it cannot be read. */
export function certificateId(der: Buffer): string | undefined {
  try {
    const cert = tlv(der, 0, der.length);
    const tbs = children(der, cert)[0]!;
    const fields = children(der, tbs);
    // [0] version is optional.
    const i = fields[0]!.tag === 0xa0 ? 1 : 0;
    const serial = fields[i]!;
    const issuer = fields[i + 2]!;
    if (serial.tag !== INTEGER || issuer.tag !== SEQUENCE) return undefined;
    return `${der.toString('hex', issuer.start, issuer.end)}/${serialHex(der, serial)}`;
  } catch {
    return undefined;
  }
}

/**
 * The certificates revoked by the CRLs of a PEM file (each `<issuer>/<serial>`, as certificateId).
 * Throws on a file that holds no CRL or one that cannot be read. The signatures are OpenSSL's to check
 * (at the handshake); this list only ever refuses more.
 */
export function revokedIds(pem: Buffer | string): Set<string> {
  const text = typeof pem === 'string' ? pem : pem.toString('latin1');
  const blocks = [...text.matchAll(/-----BEGIN X509 CRL-----([\s\S]*?)-----END X509 CRL-----/g)];
  if (blocks.length === 0) throw new Error('no X509 CRL in the file');
  const ids = new Set<string>();
  for (const block of blocks) {
    const der = Buffer.from(block[1]!.replace(/\s+/g, ''), 'base64');
    const list = tlv(der, 0, der.length);
    const tbs = children(der, list)[0];
    if (list.tag !== SEQUENCE || !tbs || tbs.tag !== SEQUENCE) throw new Error('not a CRL');
    const fields = children(der, tbs);
    // version INTEGER is optional; then signature, issuer, thisUpdate, nextUpdate?, revokedCertificates?, [0] extensions?
    let i = fields[0]?.tag === INTEGER ? 1 : 0;
    const issuer = fields[i + 1];
    if (!issuer || issuer.tag !== SEQUENCE) throw new Error('not a CRL');
    const issuerHex = der.toString('hex', issuer.start, issuer.end);
    i += 3;
    if (fields[i] && (fields[i]!.tag === 0x17 || fields[i]!.tag === 0x18)) i++;
    const revoked = fields[i];
    if (!revoked || revoked.tag !== SEQUENCE) continue;
    for (const entry of children(der, revoked)) {
      const serial = children(der, entry)[0];
      if (!serial || serial.tag !== INTEGER) throw new Error('bad CRL entry');
      ids.add(`${issuerHex}/${serialHex(der, serial)}`);
    }
  }
  return ids;
}
