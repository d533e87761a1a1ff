import { ServerResponse, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { destroySoon, headerLines, rawHeaderLines, statusLine } from '../core/raw-head.js';
import { setPendingBytes } from './websocket-protocol.js';
import { sha1Base64 } from '../core/digest.js';

/** RFC 6455 section 1.3. */
const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const TUNNELLED = Symbol('tunnelled');
type Upgraded = Duplex & { [TUNNELLED]?: boolean };

/**
 * The server's `upgrade` listener. Node hands upgrade requests (WebSocket handshakes, h2c offers) here
 * with a bare socket and runs none of the request handling; so each gets a ServerResponse on its
 * socket and is handed to the same request handler as any request: the own-endpoint lookup, the
 * pipeline, the metrics and the access line see it like any other. A handshake's pipeline ends in the
 * tunnel hand-off; anything else is answered as a plain request on a connection closed afterwards.
 */
export function acceptUpgrades(server: Server): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  return (req, socket: Upgraded, head) => {
    socket.on('error', () => socket.destroy());
    // Node's own end-of-stream handling is gone with the upgrade: a client that leaves mid-handshake
    // (FIN) is gone, and the upstream request goes with the response's close. A tunnel handles its own.
    socket.once('end', () => {
      if (!socket[TUNNELLED]) socket.destroy();
    });
    setPendingBytes(req, head);
    if (!req.complete) req.push(null);
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket as Socket);
    // The socket stays assigned until it closes (or the tunnel takes it), so the response's 'close' fires.
    res.once('finish', () => {
      socket.end();
      destroySoon(socket);
    });
    res.once('close', () => {
      if (!socket[TUNNELLED]) socket.destroy();
    });
    // Node took its own drain listener off the socket with the upgrade: without this relay a response
    // larger than the socket's buffer would wait for a 'drain' that never comes.
    socket.on('drain', () => {
      if (!res.writableFinished) res.emit('drain');
    });
    server.emit('request', req, res);
  };
}

/**
 * Why an upstream's 101 to a handshake must not be tunnelled (RFC 6455 section 4.1, the client's
 * checks, which the gateway makes on the client's behalf), or undefined when it is good: `Upgrade:
 * websocket`, `Connection: Upgrade`, `Sec-WebSocket-Accept` made from the key the gateway sent, and no
 * subprotocol the client did not offer. Tunnelling anything else would let the client talk to the
 * upstream past the gateway (h2c smuggling).
 */
export function switchProblem(res: IncomingMessage, sentKey: string | undefined, offered: readonly string[]): string | undefined {
  const h = res.headers;
  if (typeof h.upgrade !== 'string' || h.upgrade.trim().toLowerCase() !== 'websocket') return `the upstream switched to ${JSON.stringify(h.upgrade ?? '')}, not websocket`;
  const connection = typeof h.connection === 'string' ? h.connection.toLowerCase().split(',').map((t) => t.trim()) : [];
  if (!connection.includes('upgrade')) return 'the upstream\'s 101 lacks Connection: Upgrade';
  const expected = sentKey === undefined ? undefined : sha1Base64(sentKey + GUID);
  if (expected === undefined || h['sec-websocket-accept'] !== expected) return 'the upstream\'s 101 carries a wrong or no Sec-WebSocket-Accept';
  const protocol = h['sec-websocket-protocol'];
  if (protocol !== undefined && !offered.includes(protocol.trim())) return 'the upstream selected a subprotocol the client did not offer';
  return undefined;
}

/** The subprotocols a handshake offers (after the request form took a bearer entry out). */
export function offeredProtocols(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  return (Array.isArray(header) ? header.join(',') : header).split(',').map((p) => p.trim()).filter(Boolean);
}

/**
 * Takes the client's socket from the handshake's response and sends it the upstream's 101 (with the
 * gateway's own headers of this response: X-Request-Id, RateLimit-*); returns the socket, or undefined
 * when the client has already left.
 */
export function switchClient(res: ServerResponse, upstreamRes: IncomingMessage, upstreamHead: Buffer): Duplex | undefined {
  const socket = res.socket as Upgraded | null;
  if (!socket || socket.destroyed || !socket.writable) return undefined;
  socket[TUNNELLED] = true;
  res.detachSocket(socket as Socket);
  res.statusCode = 101;
  // The upstream's header lines as it sent them, then the gateway's own.
  socket.write(`${statusLine(101)}${rawHeaderLines(upstreamRes.rawHeaders)}${headerLines(res.getHeaders())}\r\n`);
  if (upstreamHead.length > 0) socket.write(upstreamHead);
  (socket as Socket).setNoDelay?.(true);
  return socket;
}
