import { STATUS_CODES, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { PROBLEM_CONTENT_TYPE, type HttpProblem } from './problem.js';
import { grpcAnswerHeaders, grpcContentType, recordGrpcStatus } from './grpc.js';

/**
 * The one writer of problem bodies: on a ServerResponse (every request, WebSocket handshakes included)
 * or, where Node hands over a bare socket (a request its parser refused, CONNECT), on the socket as raw
 * HTTP/1.1. Either way: `application/problem+json`, the problem's headers, and `Connection: close` when
 * the request's body was not read (it would be taken for the next request). A gRPC or gRPC-Web request
 * (`content-type: application/grpc…`) gets the same refusal in its own form instead (see writeGrpcProblem).
 */
export function writeProblem(res: ServerResponse, problem: HttpProblem, extra: OutgoingHttpHeaders = {}): void {
  const grpcType = grpcContentType(res.req);
  if (grpcType !== undefined) return writeGrpcProblem(res, problem, extra, grpcType);
  const body = JSON.stringify(problem.toBody());
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) res.setHeader(name, value);
  for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  if (!res.req.complete) res.setHeader('Connection', 'close');
  res.statusCode = problem.status;
  res.end(body);
}

/**
 * A refusal to a gRPC client: a problem body would only read as UNKNOWN to it. HTTP 200, the gRPC
 * status of the problem's HTTP status (see GRPC_STATUS_OF_HTTP) and its detail as `grpc-message`, as a
 * trailers-only answer; the problem's own headers (WWW-Authenticate, Retry-After) go along.
 */
function writeGrpcProblem(res: ServerResponse, problem: HttpProblem, extra: OutgoingHttpHeaders, contentType: string): void {
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) res.setHeader(name, value);
  for (const [name, value] of Object.entries(problem.headers)) res.setHeader(name, value);
  const grpc = grpcAnswerHeaders(problem, contentType);
  for (const [name, value] of Object.entries(grpc)) res.setHeader(name, value);
  if (!res.req.complete) res.setHeader('Connection', 'close');
  res.statusCode = 200;
  recordGrpcStatus(res, grpc['grpc-status']!);
  // No body and no head written yet: to an HTTP/2 client, one HEADERS frame with END_STREAM.
  res.end();
}

/** The same answer on a bare socket, which is then closed (shortly destroyed, see destroySoon). */
export function writeRawProblem(socket: Duplex, problem: HttpProblem, extra: OutgoingHttpHeaders = {}): void {
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

/** A raw HTTP/1.1 response head. Values with CR or LF, and names that are not tokens, are dropped. */
function headerBlock(status: number, headers: OutgoingHttpHeaders): string {
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
