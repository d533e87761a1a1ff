import { connect, type TLSSocket } from 'node:tls';

/**
 * HTTP/2 frames written by hand (RFC 9113 section 4.1) over a TLS connection that negotiated `h2`:
 * what no well-behaved client library sends (a HEADERS + RST_STREAM loop, CONTINUATION frames without
 * END_HEADERS, thousands of SETTINGS or PINGs, frames that break the protocol) can be sent as fast as the
 * socket takes them. The frames the server sends back are parsed, so a test can wait for its GOAWAY.
 */

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FrameType = {
  DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9,
} as const;
export const Flags = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;
/** RST_STREAM and GOAWAY error codes (RFC 9113 section 7). */
export const ErrorCode = { NO_ERROR: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2, FLOW_CONTROL_ERROR: 3, FRAME_SIZE_ERROR: 6, CANCEL: 8, COMPRESSION_ERROR: 9, ENHANCE_YOUR_CALM: 11 } as const;

/** One frame: the 9-byte header and its payload. */
export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an `prefixBits`-bit prefix (RFC 7541 section 5.1); `first` holds the bits above the prefix. */
function hpackInt(value: number, prefixBits: number, first = 0): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([first | value]);
  const out = [first | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

/** A header block of literal fields without indexing and without Huffman (RFC 7541 section 6.2.2): no state to share. */
export function headerBlock(headers: Array<[string, string]>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of headers) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([0x00]), hpackInt(n.length, 7), n, hpackInt(v.length, 7), v);
  }
  return Buffer.concat(parts);
}

/** A GET's header block for `path` on `authority`. */
export function getRequest(path: string, authority = '127.0.0.1', extra: Array<[string, string]> = []): Buffer {
  return headerBlock([[':method', 'GET'], [':scheme', 'https'], [':authority', authority], [':path', path], ...extra]);
}

export function headersFrame(streamId: number, block: Buffer, flags = Flags.END_HEADERS | Flags.END_STREAM): Buffer {
  return frame(FrameType.HEADERS, flags, streamId, block);
}

export function rstStream(streamId: number, code: number = ErrorCode.CANCEL): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code);
  return frame(FrameType.RST_STREAM, 0, streamId, payload);
}

/** A SETTINGS frame with the given (identifier, value) pairs; none: an empty one. */
export function settings(pairs: Array<[number, number]> = [], ack = false): Buffer {
  const payload = Buffer.alloc(pairs.length * 6);
  pairs.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return frame(FrameType.SETTINGS, ack ? Flags.ACK : 0, 0, payload);
}

export function ping(data = Buffer.alloc(8), ack = false): Buffer {
  return frame(FrameType.PING, ack ? Flags.ACK : 0, 0, data);
}

export function windowUpdate(streamId: number, increment: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(increment);
  return frame(FrameType.WINDOW_UPDATE, 0, streamId, payload);
}

/** A frame as received. */
export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** A GOAWAY received: the last stream the server processed and its error code. */
export interface GoAway {
  lastStreamId: number;
  errorCode: number;
}

/** A raw HTTP/2 connection: write frames, read the server's. */
export class RawH2 {
  readonly frames: Frame[] = [];
  goaway: GoAway | undefined;
  /** True once the connection is closed (either side). */
  closed = false;
  /** Frames received, by type (counted even when not kept). */
  readonly counts = new Map<number, number>();
  private buffered: Buffer = Buffer.alloc(0);
  private readonly waiters = new Set<() => void>();

  private constructor(readonly socket: TLSSocket, private readonly keep: boolean) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
      this.notify();
    });
  }

  /**
   * Connects with ALPN `h2` only (trusting `ca`, or anything without one), sends the preface and an empty
   * SETTINGS. `keep`: keep every frame received (a flood test keeps counts only).
   */
  static open(port: number, options: { ca?: Buffer; keep?: boolean; host?: string } = {}): Promise<RawH2> {
    return new Promise((resolve, reject) => {
      const socket = connect({
        host: options.host ?? '127.0.0.1', port, ALPNProtocols: ['h2'], servername: 'localhost',
        ...(options.ca ? { ca: options.ca } : { rejectUnauthorized: false }),
      }, () => {
        if (socket.alpnProtocol !== 'h2') {
          socket.destroy();
          reject(new Error(`ALPN negotiated ${String(socket.alpnProtocol)}, not h2`));
          return;
        }
        const raw = new RawH2(socket, options.keep ?? true);
        socket.write(Buffer.concat([PREFACE, settings()]));
        resolve(raw);
      });
      socket.once('error', reject);
    });
  }

  /** Writes frames; resolves once the socket took them (or the connection is gone). */
  send(...frames: Buffer[]): Promise<void> {
    if (this.closed || this.socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      this.socket.write(Buffer.concat(frames), () => resolve());
    });
  }

  /** Resolves once `check` holds (checked on every frame and at close), or rejects after timeoutMs. */
  until(check: () => boolean, timeoutMs: number, what = 'condition'): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = () => {
        if (!check()) return;
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`timed out waiting for ${what}`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private read(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    while (this.buffered.length >= 9) {
      const length = this.buffered.readUIntBE(0, 3);
      if (this.buffered.length < 9 + length) break;
      const f: Frame = {
        type: this.buffered[3]!,
        flags: this.buffered[4]!,
        streamId: this.buffered.readUInt32BE(5) & 0x7fffffff,
        payload: this.buffered.subarray(9, 9 + length),
      };
      this.buffered = this.buffered.subarray(9 + length);
      this.counts.set(f.type, (this.counts.get(f.type) ?? 0) + 1);
      if (f.type === FrameType.GOAWAY && f.payload.length >= 8) {
        this.goaway = { lastStreamId: f.payload.readUInt32BE(0) & 0x7fffffff, errorCode: f.payload.readUInt32BE(4) };
      }
      // A client that reads nothing would be a different attack: the SETTINGS the server sends are acknowledged.
      if (f.type === FrameType.SETTINGS && (f.flags & Flags.ACK) === 0 && !this.socket.destroyed) this.socket.write(settings([], true));
      if (this.keep || f.type === FrameType.GOAWAY) this.frames.push({ ...f, payload: Buffer.from(f.payload) });
    }
    this.notify();
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
