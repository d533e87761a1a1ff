import { STATUS_CODES, type OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import { HttpProblem, PROBLEM_CONTENT_TYPE } from '../http/problem.js';

/**
 * After an `upgrade` event there is no ServerResponse, only the socket: answers are written as raw
 * HTTP/1.1 and the connection is closed. Values with CR or LF are dropped, never written.
 */
export function headerBlock(status: number, headers: OutgoingHttpHeaders | Array<[string, string]>): string {
  let out = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
  const pairs: Array<[string, unknown]> = Array.isArray(headers) ? headers : Object.entries(headers);
  for (const [name, value] of pairs) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) {
      const text = String(v);
      if (!/[\r\n]/.test(text) && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) out += `${name}: ${text}\r\n`;
    }
  }
  return `${out}\r\n`;
}

/** Writes the problem (with its headers and `extra`) and closes; the socket is destroyed shortly after. */
export function writeProblem(socket: Duplex, problem: HttpProblem, extra: OutgoingHttpHeaders = {}): void {
  if (!socket.writable || socket.destroyed) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(problem.toBody());
  socket.end(headerBlock(problem.status, {
    ...extra,
    ...problem.headers,
    'Content-Type': PROBLEM_CONTENT_TYPE,
    'Content-Length': Buffer.byteLength(body),
    Connection: 'close',
  }) + body);
  destroySoon(socket);
}

/**
 * Lets a written answer reach the client, but never keeps a socket past a second. What the client still
 * sends is read and dropped: closing with unread bytes would make the kernel send a reset, which can
 * destroy the answer before the client reads it.
 */
export function destroySoon(socket: Duplex): void {
  const timer = setTimeout(() => socket.destroy(), 1000);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', () => socket.destroy());
  socket.resume();
}
