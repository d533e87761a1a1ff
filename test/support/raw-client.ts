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
  /** Resolves when the peer closed the connection (or at once when it already did). */
  closed(): Promise<void>;
  /** Whether the connection is closed. */
  isClosed(): boolean;
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
    socket.once('connect', () => resolve({
      socket,
      text: () => buf,
      isClosed: () => ended,
      waitFor: (pattern, ms) => new Promise((done) => {
        const finish = (ok: boolean) => {
          clearTimeout(timer);
          waiters.delete(check);
          done(ok);
        };
        const check = () => {
          if (pattern.test(buf)) finish(true);
          else if (ended) finish(false);
        };
        const timer = setTimeout(() => finish(false), ms);
        waiters.add(check);
        check();
      }),
      closed: () => (ended ? Promise.resolve() : new Promise((done) => socket.once('close', () => done()))),
    }));
    socket.once('error', reject);
  });
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
export interface ParsedResponse {
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

/** Every complete response in buf (Content-Length or chunked framing; unframed only once closed). */
export function parseResponses(buf: Buffer, closed: boolean): ParsedResponse[] {
  const out: ParsedResponse[] = [];
  let off = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', off);
    if (end < 0) return out;
    const lines = buf.subarray(off, end).toString('latin1').split('\r\n');
    const status = Number(lines[0]!.split(' ')[1]);
    const raw: string[] = [];
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      raw.push(line.slice(0, colon), line.slice(colon + 1).trim());
    }
    const headers = headerMap(raw);
    let pos = end + 4;
    let body: Buffer;
    const length = headers['content-length']?.[0];
    if (length !== undefined) {
      if (buf.length < pos + Number(length)) return out;
      body = buf.subarray(pos, pos + Number(length));
      pos += Number(length);
    } else if (/chunked/i.test(headers['transfer-encoding']?.join(',') ?? '')) {
      const parts: Buffer[] = [];
      for (;;) {
        const eol = buf.indexOf('\r\n', pos);
        if (eol < 0) return out;
        const size = parseInt(buf.subarray(pos, eol).toString('latin1'), 16);
        if (buf.length < eol + 2 + size + 2) return out;
        if (size === 0) {
          pos = eol + 4;
          break;
        }
        parts.push(buf.subarray(eol + 2, eol + 2 + size));
        pos = eol + 2 + size + 2;
      }
      body = Buffer.concat(parts);
    } else if (status === 204 || status === 304) {
      body = Buffer.alloc(0);
    } else {
      if (!closed) return out;
      body = buf.subarray(pos);
      pos = buf.length;
    }
    out.push({ status, headers, body: body.toString('utf8') });
    off = pos;
  }
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

