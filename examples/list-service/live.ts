// GET /v1/conversations/live as a WebSocket (RFC 6455), with node:http and node:crypto only: the server
// greets with the data set's size, then answers every text message with an echo. Enough to try the
// gateway's WebSocket proxying against (the README's quick start).

import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

const LIVE_PATH = '/v1/conversations/live';
const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** Larger client frames are refused: the example only echoes short messages. */
const MAX_FRAME_BYTES = 64 * 1024;

/** Handles an `upgrade` of the list service: the live endpoint, or a plain 404/400 answer. */
export function upgradeLive(greeting: () => unknown) {
  return (req: IncomingMessage, socket: Duplex): void => {
    socket.on('error', () => socket.destroy());
    const path = (req.url ?? '/').split('?')[0];
    const key = req.headers['sec-websocket-key'];
    if (path !== LIVE_PATH) return refuse(socket, 404, `no WebSocket endpoint at '${path}'`);
    if (req.headers.upgrade?.toLowerCase() !== 'websocket' || typeof key !== 'string' || req.headers['sec-websocket-version'] !== '13') {
      return refuse(socket, 400, 'a WebSocket handshake (version 13) is expected');
    }
    const accept = createHash('sha1').update(key + GUID).digest('base64');
    const offered = String(req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim()).filter(Boolean);
    socket.write([
      'HTTP/1.1 101 Switching Protocols',
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Sec-WebSocket-Accept: ${accept}`,
      ...(offered.length > 0 ? [`Sec-WebSocket-Protocol: ${offered[0]}`] : []),
      '',
      '',
    ].join('\r\n'));
    socket.write(frame(1, Buffer.from(JSON.stringify({ type: 'hello', ...(greeting() as object) }))));
    readFrames(socket);
  };
}

function refuse(socket: Duplex, status: number, detail: string): void {
  const body = JSON.stringify({ type: 'about:blank', title: status === 404 ? 'Not Found' : 'Bad Request', status, detail, code: status === 404 ? 'not_found' : 'invalid_request' });
  socket.end(`HTTP/1.1 ${status} ${status === 404 ? 'Not Found' : 'Bad Request'}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/** A server frame: final, unmasked. */
function frame(opcode: number, payload: Buffer): Buffer {
  const length = payload.length;
  const header = length < 126 ? Buffer.from([0x80 | opcode, length])
    : length < 65536 ? Buffer.from([0x80 | opcode, 126, length >> 8, length & 0xff])
    : Buffer.concat([Buffer.from([0x80 | opcode, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(length)); return b; })()]);
  return Buffer.concat([header, payload]);
}

/** Client frames (masked): text is echoed, ping answered, close returned; anything else closes. */
function readFrames(socket: Duplex): void {
  let buffered = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (;;) {
      if (buffered.length < 2) return;
      const opcode = buffered[0]! & 0x0f;
      const masked = (buffered[1]! & 0x80) !== 0;
      let length = buffered[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buffered.length < 4) return;
        length = buffered.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buffered.length < 10) return;
        length = Number(buffered.readBigUInt64BE(2));
        offset = 10;
      }
      if (!masked || length > MAX_FRAME_BYTES) return closeWith(socket, 1002);
      if (buffered.length < offset + 4 + length) return;
      const mask = buffered.subarray(offset, offset + 4);
      const payload = Buffer.from(buffered.subarray(offset + 4, offset + 4 + length));
      for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i % 4]!;
      buffered = buffered.subarray(offset + 4 + length);
      if (opcode === 1) socket.write(frame(1, Buffer.from(JSON.stringify({ type: 'echo', data: payload.toString('utf8') }))));
      else if (opcode === 9) socket.write(frame(10, payload));
      else if (opcode === 8) return closeWith(socket, payload.length >= 2 ? payload.readUInt16BE(0) : 1000);
      else if (opcode !== 10) return closeWith(socket, 1003);
    }
  });
}

function closeWith(socket: Duplex, code: number): void {
  const payload = Buffer.alloc(2);
  payload.writeUInt16BE(code);
  socket.end(frame(8, payload));
}
