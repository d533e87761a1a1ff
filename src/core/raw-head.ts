import { STATUS_CODES, type OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';

// Raw HTTP/1.1 heads on a bare socket (a tunnel's 101, an answer where Node hands over the socket) and
// the socket's end. What a problem answer says is the HTTP edge's (src/http/problem.ts); how its bytes
// go on a socket is here.

/** A raw HTTP/1.1 response head. Values with CR or LF, and names that are not tokens, are dropped. */
export function headerBlock(status: number, headers: OutgoingHttpHeaders): string {
  return `${statusLine(status)}${headerLines(headers)}\r\n`;
}

/** `HTTP/1.1 <status> <reason>` and its CRLF, the first line of a raw head. */
export function statusLine(status: number): string {
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
}

/** Header lines of a raw head from [name, value, name, value, …] (Node's rawHeaders), checked as headerLines does. */
export function rawHeaderLines(raw: readonly string[]): string {
  let out = '';
  for (let i = 0; i + 1 < raw.length; i += 2) out += headerLine(raw[i]!, raw[i + 1]!);
  return out;
}

/** Header lines of a raw head from a header object (a value list is a line each). */
export function headerLines(headers: OutgoingHttpHeaders): string {
  let out = '';
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out += headerLine(name, String(v));
    else out += headerLine(name, String(value));
  }
  return out;
}

function headerLine(name: string, value: string): string {
  return !/[\r\n]/.test(value) && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) ? `${name}: ${value}\r\n` : '';
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
