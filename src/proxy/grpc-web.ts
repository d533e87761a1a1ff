import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';

/**
 * gRPC-Web (github.com/grpc/grpc/blob/master/doc/PROTOCOL-WEB.md), bridged to a gRPC upstream: the
 * request's frames go on as they are (base64-decoded for the `-text` types), the upstream's trailers come
 * back as the body's last frame (flag 0x80, `name: value\r\n` lines), base64 again for `-text`.
 */
export interface GrpcWeb {
  /** `application/grpc-web-text…`: both bodies are base64. */
  readonly text: boolean;
  /** The content type the upstream is sent (`application/grpc` or `application/grpc+proto`, …). */
  readonly upstreamType: string;
  /** The content type of the answer: the request's own. */
  readonly clientType: string;
}

const GRPC_WEB = /^application\/grpc-web(-text)?(\+[a-z0-9.-]+)?\s*(?:;.*)?$/i;

/** The request's gRPC-Web form, or undefined when it is not a gRPC-Web request. */
export function grpcWebOf(req: IncomingMessage): GrpcWeb | undefined {
  const type = req.headers['content-type'];
  const m = typeof type === 'string' ? GRPC_WEB.exec(type) : null;
  if (!m) return undefined;
  const suffix = (m[2] ?? '').toLowerCase();
  return { text: m[1] !== undefined, upstreamType: `application/grpc${suffix}`, clientType: `application/grpc-web${m[1] ? '-text' : ''}${suffix}` };
}

/** Decodes a base64 body chunk by chunk (a chunk may end inside a 4-character group). */
export class Base64Decoder {
  private rest = '';

  push(chunk: Buffer): Buffer {
    const text = this.rest + chunk.toString('latin1').replace(/\s+/g, '');
    const whole = text.length - (text.length % 4);
    this.rest = text.slice(whole);
    return Buffer.from(text.slice(0, whole), 'base64');
  }
}

/** Encodes a body as base64 chunk by chunk: whole 3-byte groups as they come, the rest (padded) at the end. */
export class Base64Encoder {
  private rest: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): string {
    const bytes = this.rest.length > 0 ? Buffer.concat([this.rest, chunk]) : chunk;
    const whole = bytes.length - (bytes.length % 3);
    this.rest = bytes.subarray(whole);
    return bytes.subarray(0, whole).toString('base64');
  }

  end(): string {
    const out = this.rest.toString('base64');
    this.rest = Buffer.alloc(0);
    return out;
  }
}

/** The trailers as gRPC-Web's last frame: flag 0x80, a 4-byte length, then `name: value\r\n` per field (names lower case). */
export function trailerFrame(trailers: OutgoingHttpHeaders): Buffer {
  let lines = '';
  for (const name of Object.keys(trailers)) {
    const value = trailers[name];
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) lines += `${name.toLowerCase()}: ${String(v)}\r\n`;
  }
  const body = Buffer.from(lines, 'latin1');
  const head = Buffer.alloc(5);
  head[0] = 0x80;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}
