import type { IncomingMessage } from 'node:http';

/**
 * Browsers cannot set Authorization on a WebSocket; the one header they control is
 * Sec-WebSocket-Protocol. A client puts its access token there as one more offered subprotocol,
 * `base64url.bearer.auth-gateway.<base64url(token), no padding>` (the shape Kubernetes uses), next to
 * the application's real subprotocol. The gateway takes the entry out before forwarding, so the
 * token never reaches the upstream, and the real subprotocol is the one the upstream selects.
 */
export const BEARER_PROTOCOL_PREFIX = 'base64url.bearer.auth-gateway.';

export type BearerProtocol =
  /** No token entry: the header (if any) goes on unchanged. */
  | { kind: 'none' }
  /** A token, and what is left of the header for the upstream. */
  | { kind: 'token'; token: string; rest: string[] }
  | { kind: 'invalid'; reason: string };

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** Reads the token entry out of the Sec-WebSocket-Protocol header(s) (comma-separated lists). */
export function takeBearerProtocol(header: string | string[] | undefined): BearerProtocol {
  if (header === undefined) return { kind: 'none' };
  const entries = (Array.isArray(header) ? header.join(',') : header).split(',').map((e) => e.trim()).filter(Boolean);
  const bearer = entries.filter((e) => e.startsWith(BEARER_PROTOCOL_PREFIX));
  if (bearer.length === 0) return { kind: 'none' };
  if (bearer.length > 1) return { kind: 'invalid', reason: 'Sec-WebSocket-Protocol carries more than one bearer token entry' };
  const rest = entries.filter((e) => !e.startsWith(BEARER_PROTOCOL_PREFIX));
  if (rest.length === 0) {
    // The upstream must select a subprotocol the client offered (browsers fail the handshake otherwise),
    // and the gateway never echoes the token entry back.
    return { kind: 'invalid', reason: `offer the application's subprotocol next to the ${BEARER_PROTOCOL_PREFIX}<token> entry` };
  }
  const encoded = bearer[0]!.slice(BEARER_PROTOCOL_PREFIX.length);
  const bytes = Buffer.from(encoded, 'base64url');
  // One spelling per token: unpadded canonical base64url only.
  if (!BASE64URL.test(encoded) || bytes.toString('base64url') !== encoded) {
    return { kind: 'invalid', reason: 'the bearer subprotocol entry is not canonical unpadded base64url' };
  }
  return { kind: 'token', token: bytes.toString('latin1'), rest };
}

/** The bytes that came after an upgrade request's head (see acceptUpgrades). */
const PENDING = Symbol('upgrade head');
export function setPendingBytes(req: IncomingMessage, head: Buffer): void {
  (req as IncomingMessage & { [PENDING]?: Buffer })[PENDING] = head;
}
export function takePendingBytes(req: IncomingMessage): Buffer {
  const r = req as IncomingMessage & { [PENDING]?: Buffer };
  const head = r[PENDING] ?? Buffer.alloc(0);
  r[PENDING] = undefined;
  return head;
}
export function pendingBytes(req: IncomingMessage): number {
  return (req as IncomingMessage & { [PENDING]?: Buffer })[PENDING]?.length ?? 0;
}
