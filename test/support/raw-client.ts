import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * The one raw-socket client of the suites: bytes written as they are, bytes read as they come, so
 * framing and handshakes are tested the way an outsider (or an attacker) speaks. Loopback only.
 */
export interface Conversation {
  socket: Socket;
  /** Everything read so far (latin1, byte for byte). */
  text(): string;
  /** Resolves true when `pattern` has been read, false once the socket closed without it or after `ms`. */
  waitFor(pattern: RegExp, ms: number): Promise<boolean>;
  /** Resolves true as soon as `check` holds (tried now, on each read and on close), false after `ms`. */
  waitUntil(check: () => boolean, ms: number): Promise<boolean>;
  /** Resolves true when the peer closed the connection within `ms`, false otherwise. */
  closedWithin(ms: number): Promise<boolean>;
  /** Resolves when the peer closed the connection (or at once when it already did). */
  closed(): Promise<void>;
  /** Whether the connection is closed. */
  isClosed(): boolean;
  /** The complete responses read so far, in order (pipelined answers; see parseResponses). */
  responses(): ParsedResponse[];
}

export function openRaw(port: number, host = '127.0.0.1'): Promise<Conversation> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, host);
    let buf = '';
    let ended = false;
    const waiters = new Set<() => void>();
    const wake = () => {
      for (const w of [...waiters]) w();
    };
    socket.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      ended = true;
      wake();
    });
    /** Resolves with `check()`'s verdict once it is true or `final()` holds, false after `ms`. */
    const until = (check: () => boolean, final: () => boolean, ms: number) => new Promise<boolean>((done) => {
      const finish = (ok: boolean) => {
        clearTimeout(timer);
        waiters.delete(test);
        done(ok);
      };
      const test = () => {
        if (check()) finish(true);
        else if (final()) finish(false);
      };
      const timer = setTimeout(() => finish(false), ms);
      waiters.add(test);
      test();
    });
    socket.once('connect', () => resolve({
      socket,
      text: () => buf,
      isClosed: () => ended,
      waitFor: (pattern, ms) => until(() => pattern.test(buf), () => ended, ms),
      waitUntil: (check, ms) => until(check, () => false, ms),
      closedWithin: (ms) => until(() => ended, () => false, ms),
      closed: () => (ended ? Promise.resolve() : new Promise((done) => socket.once('close', () => done()))),
      responses: () => parseResponses(Buffer.from(buf, 'latin1'), ended),
    }));
    socket.once('error', reject);
  });
}

/** True when a TCP connection to the port is refused (nothing listens any more); false when it is accepted. */
export function refused(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

/**
 * A request as it goes on the wire: the request line, Host (127.0.0.1 unless `headers` names one), the
 * header lines in the given order (a list value is one line each), the blank line, then `body` as it is.
 * Nothing is added: a body needs its own Content-Length or Transfer-Encoding.
 */
export function requestText(method: string, target: string, headers: OutgoingHttpHeaders = {}, body: string = ''): string {
  const entries = Object.entries(headers).filter(([, v]) => v !== undefined);
  if (!entries.some(([n]) => n.toLowerCase() === 'host')) entries.unshift(['Host', '127.0.0.1']);
  const lines = entries.flatMap(([n, v]) => (Array.isArray(v) ? v : [v]).map((one) => `${n}: ${String(one)}\r\n`)).join('');
  return `${method} ${target} HTTP/1.1\r\n${lines}\r\n${body}`;
}

/** Writes `bytes` on a fresh connection and reads until the peer closes it or `ms` pass; the text read. */
export async function exchange(port: number, bytes: string | Buffer, ms = 3000): Promise<string> {
  const c = await openRaw(port);
  c.socket.write(bytes);
  await Promise.race([c.closed(), new Promise((r) => setTimeout(r, ms))]);
  c.socket.destroy();
  return c.text();
}

/** As exchange, but the peer must close the connection within `ms`: rejects otherwise. */
export async function exchangeUntilClosed(port: number, bytes: string | Buffer, ms = 5000): Promise<string> {
  const c = await openRaw(port);
  c.socket.write(bytes);
  const closed = await Promise.race([c.closed().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), ms))]);
  c.socket.destroy();
  if (!closed) throw new Error(`no complete answer within ${ms} ms (the connection stayed open)`);
  return c.text();
}

export interface RawAnswer {
  status: number;
  /** Lower-cased names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: string;
}

/** The first response head (and what follows it) in raw text; status 0 when there is none. */
export function parseAnswer(text: string): RawAnswer {
  const end = text.indexOf('\r\n\r\n');
  const head = end < 0 ? text : text.slice(0, end);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body: end < 0 ? '' : text.slice(end + 4) };
}

/** A WebSocket handshake request (RFC 6455 section 4.1) with the given target and extra header lines. */
export function handshake(target: string, extra: Record<string, string> = {}, key = 'dGhlIHNhbXBsZSBub25jZQ=='): string {
  const lines = Object.entries({
    Host: '127.0.0.1',
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': key,
    'Sec-WebSocket-Version': '13',
    ...extra,
  }).map(([n, v]) => `${n}: ${v}\r\n`).join('');
  return `GET ${target} HTTP/1.1\r\n${lines}\r\n`;
}

export interface RawUpstream {
  url: string;
  port: number;
  server: Server;
  /** Each request head received (text up to the blank line), in order. */
  heads: string[];
  /** Sockets of the upstream's side, open or closed. */
  sockets: Socket[];
  /** How it answers a request head (default: nothing, the connection is held). */
  onHead: (head: string, socket: Socket) => void;
  close(): Promise<void>;
}

/** An upstream that speaks raw bytes: it records request heads and answers them as `onHead` says. */
export async function rawUpstream(): Promise<RawUpstream> {
  const up: RawUpstream = {
    url: '', port: 0, heads: [], sockets: [],
    server: createServer((socket) => {
      up.sockets.push(socket);
      socket.on('error', () => {});
      let buf = '';
      const onData = (d: Buffer) => {
        buf += d.toString('latin1');
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        socket.off('data', onData);
        const head = buf.slice(0, end);
        up.heads.push(head);
        up.onHead(head, socket);
      };
      socket.on('data', onData);
    }),
    onHead: () => {},
    close: () => new Promise((resolve) => {
      for (const s of up.sockets) s.destroy();
      up.server.close(() => resolve());
    }),
  };
  await new Promise<void>((resolve) => up.server.listen(0, '127.0.0.1', resolve));
  up.port = (up.server.address() as { port: number }).port;
  up.url = `http://127.0.0.1:${up.port}`;
  return up;
}

/** A header's value in a raw request head (first occurrence, case-insensitive name). */
export function headerOf(head: string, name: string): string | undefined {
  const m = new RegExp(`\\r\\n${name}:[ \\t]*([^\\r\\n]*)`, 'i').exec(head);
  return m?.[1];
}

/** One response as read off the wire: lower-case header names, every value as sent. */
interface ParsedResponse {
  status: number;
  headers: Record<string, string[]>;
  body: string;
}

/** A response read by rawResponse, and how many complete responses the connection carried. */
export interface RawReply extends ParsedResponse {
  /** 2 means a second (smuggled) request was answered. */
  responses: number;
  elapsedMs: number;
}

/** Lower-cased names to every value, from a [name, value, …] list. */
export function headerMap(rawHeaders: string[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) (out[rawHeaders[i]!.toLowerCase()] ??= []).push(rawHeaders[i + 1]!);
  return out;
}

/** A response head at `off` in buf: status, [name, value, …] and where the body starts; undefined while incomplete. */
function parseHead(buf: Buffer, off = 0): { status: number; rawHeaders: string[]; bodyStart: number } | undefined {
  const end = buf.indexOf('\r\n\r\n', off);
  if (end < 0) return undefined;
  const lines = buf.subarray(off, end).toString('latin1').split('\r\n');
  const rawHeaders: string[] = [];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    rawHeaders.push(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return { status: Number(lines[0]!.split(' ')[1]), rawHeaders, bodyStart: end + 4 };
}

/**
 * One response body read off the wire as it comes, by its framing: Content-Length, chunked (extensions and
 * trailers skipped), none (204, 304, an answer to HEAD), or until the connection closes. `onBytes` gets the
 * body's bytes without the chunk framing. A length or chunk size that is no number never completes.
 */
class BodyReader {
  done = false;
  /** Body bytes read so far. */
  bytes = 0;
  private mode: 'length' | 'chunked' | 'close' | 'malformed';
  private left = 0;
  private state: 'size' | 'data' | 'crlf' | 'trailer' = 'size';
  private line = '';

  constructor(status: number, headers: Record<string, string[]>, private readonly onBytes: (chunk: Buffer) => void, noBody = false) {
    const length = headers['content-length']?.[0];
    if (noBody || status === 204 || status === 304 || (status >= 100 && status < 200)) {
      this.mode = 'length';
    } else if (length !== undefined) {
      this.mode = /^\d+$/.test(length) ? 'length' : 'malformed';
      this.left = Number(length);
    } else if (/chunked/i.test(headers['transfer-encoding']?.join(',') ?? '')) {
      this.mode = 'chunked';
    } else {
      this.mode = 'close';
    }
    if (this.mode === 'length' && this.left === 0) this.done = true;
  }

  /** Reads from `data`; returns what follows the body's end (the next response) once done, else an empty buffer. */
  push(data: Buffer): Buffer {
    let pos = 0;
    while (!this.done && pos < data.length) {
      if (this.mode === 'malformed') {
        pos = data.length;
      } else if (this.mode === 'close') {
        this.take(data.subarray(pos));
        pos = data.length;
      } else if (this.mode === 'length' || this.state === 'data') {
        const n = Math.min(this.left, data.length - pos);
        this.take(data.subarray(pos, pos + n));
        pos += n;
        this.left -= n;
        if (this.left > 0) continue;
        if (this.mode === 'length') this.done = true;
        else this.state = 'crlf';
      } else {
        const eol = data.indexOf(0x0a, pos);
        this.line += data.subarray(pos, eol < 0 ? data.length : eol + 1).toString('latin1');
        pos = eol < 0 ? data.length : eol + 1;
        if (eol < 0) continue;
        const line = this.line.replace(/\r?\n$/, '');
        this.line = '';
        if (this.state === 'crlf') {
          this.state = 'size';
        } else if (this.state === 'size') {
          this.left = parseInt(line, 16);
          if (Number.isNaN(this.left)) this.mode = 'malformed';
          this.state = this.left === 0 ? 'trailer' : 'data';
        } else if (line === '') {
          this.done = true;
        }
      }
    }
    return data.subarray(pos);
  }

  /** The connection closed: true when that completes the body (it had no framing), false when it cut it. */
  close(): boolean {
    if (this.mode === 'close') this.done = true;
    return this.done;
  }

  private take(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.bytes += chunk.length;
    this.onBytes(chunk);
  }
}

/** Every complete response in buf (Content-Length or chunked framing; unframed only once closed). */
function parseResponses(buf: Buffer, closed: boolean): ParsedResponse[] {
  const out: ParsedResponse[] = [];
  let off = 0;
  for (;;) {
    const head = parseHead(buf, off);
    if (!head) return out;
    const headers = headerMap(head.rawHeaders);
    const parts: Buffer[] = [];
    const reader = new BodyReader(head.status, headers, (c) => parts.push(c));
    const rest = reader.push(buf.subarray(head.bodyStart));
    if (!reader.done && !(closed && reader.close())) return out;
    out.push({ status: head.status, headers, body: Buffer.concat(parts).toString('utf8') });
    off = buf.length - rest.length;
  }
}

export interface RawRequestOptions {
  method?: string;
  headers?: OutgoingHttpHeaders;
  body?: string;
  /** Bounds the exchange (default 5 s): before the head it rejects, after it the body counts as cut. */
  timeoutMs?: number;
  /** Keep the body (default true); its bytes are counted either way. */
  keepBody?: boolean;
  /** Each piece of the body as it arrives, with the connection (to pause reading, say). */
  onBody?: (chunk: Buffer, socket: Socket) => void;
}

export interface RawResult {
  status: number;
  /** As node:http has them: lower-case names, set-cookie a list, other repeats joined with ", ". */
  headers: IncomingHttpHeaders;
  body: Buffer;
  bytes: number;
  /** Set when the head arrived but the body did not, whole (cut, reset or timed out). */
  bodyError?: string;
  ms: number;
}

/** Header values as node:http's IncomingMessage.headers keeps them. */
function incomingHeaders(rawHeaders: string[]): IncomingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (const [name, values] of Object.entries(headerMap(rawHeaders))) {
    out[name] = name === 'set-cookie' ? values : values.join(', ');
  }
  return out as IncomingHttpHeaders;
}

/**
 * One request on a fresh connection, the way node:http with `agent: false` sends it (Host with the
 * port, Connection: close, Content-Length for a body or a method that has one), and its response read
 * off the wire (informational answers skipped). Rejects when no response head arrives (refused, closed
 * or reset first, timeout); resolves with `bodyError` when the body was cut.
 */
export function request(port: number, target: string, options: RawRequestOptions = {}): Promise<RawResult> {
  const started = Date.now();
  const method = options.method ?? 'GET';
  const timeoutMs = options.timeoutMs ?? 5000;
  const body = options.body === undefined ? undefined : Buffer.from(options.body);
  const headers: OutgoingHttpHeaders = { ...options.headers };
  const named = (pattern: RegExp) => Object.keys(headers).some((n) => pattern.test(n));
  if (!named(/^host$/i)) headers.Host = `127.0.0.1:${port}`;
  if (!named(/^connection$/i)) headers.Connection = 'close';
  if ((body !== undefined || !['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'].includes(method)) && !named(/^(content-length|transfer-encoding)$/i)) {
    headers['Content-Length'] = body?.length ?? 0;
  }
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let pending: Buffer = Buffer.alloc(0);
    let answer: { status: number; headers: IncomingHttpHeaders; reader: BodyReader } | undefined;
    let settled = false;
    const settle = (bodyError?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: answer!.status, headers: answer!.headers, body: Buffer.concat(chunks), bytes: answer!.reader.bytes, bodyError, ms: Date.now() - started });
    };
    const fail = (err: Error) => {
      if (settled) return;
      if (answer) return settle(err.message || 'error');
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`no answer to ${target} within ${timeoutMs} ms`)), timeoutMs);
    socket.on('data', (d: Buffer) => {
      let data = d;
      while (!settled && data.length > 0) {
        if (!answer) {
          pending = pending.length ? Buffer.concat([pending, data]) : data;
          const head = parseHead(pending);
          if (!head) return;
          const map = headerMap(head.rawHeaders);
          const reader = new BodyReader(head.status, map, (c) => {
            options.onBody?.(c, socket);
            if (options.keepBody !== false) chunks.push(c);
          }, method === 'HEAD');
          data = pending.subarray(head.bodyStart);
          pending = Buffer.alloc(0);
          if (head.status >= 100 && head.status < 200 && head.status !== 101) continue;
          answer = { status: head.status, headers: incomingHeaders(head.rawHeaders), reader };
        }
        data = answer.reader.push(data);
        if (answer.reader.done) settle();
      }
    });
    socket.on('error', (err) => fail(err));
    socket.on('close', () => {
      if (answer && answer.reader.close()) settle();
      else fail(Object.assign(new Error(answer ? 'closed before the end' : 'socket hang up'), { code: 'ECONNRESET' }));
    });
    socket.write(requestText(method, target, headers));
    if (body !== undefined) socket.write(body);
  });
}

/**
 * Writes bytes as they are to a fresh connection and reads what comes back. Resolves once the first
 * response is complete, or `lingerMs` later (to catch the answer to a smuggled second request).
 * A reset after the answer (oversized requests) is expected; a reset without one is an error.
 */
export function rawResponse(port: number, data: string | Buffer, options: { lingerMs?: number } = {}): Promise<RawReply> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let answeredAt = 0;
    let done = false;
    let linger: NodeJS.Timeout | undefined;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(hard);
      clearTimeout(linger);
      socket.destroy();
      const buf = Buffer.concat(chunks);
      const responses = parseResponses(buf, closed);
      if (responses.length === 0) {
        reject(new Error(`no HTTP response (got ${JSON.stringify(buf.toString('latin1').slice(0, 200))})`));
        return;
      }
      resolve({ ...responses[0]!, responses: responses.length, elapsedMs: (answeredAt || performance.now()) - started });
    };
    const hard = setTimeout(() => finish(true), 5000);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (answeredAt || parseResponses(Buffer.concat(chunks), false).length === 0) return;
      answeredAt = performance.now();
      if (options.lingerMs) linger = setTimeout(() => finish(true), options.lingerMs);
      else finish(false);
    });
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.write(data);
  });
}

