import type { IncomingMessage } from 'node:http';
import { continueIfExpected } from './expect.js';
import { HttpProblem } from './problem.js';
import type { GatewayMiddleware } from './state.js';

/**
 * Reads a JSON object body of at most `limitBytes`, arriving within `timeoutMs`, into ctx.state.body:
 * 400 for a missing or empty body, 415 for another content type or any Content-Encoding but identity
 * (a gzip body is not read as if it were plain, nor inflated: token bodies are small), 413 past the limit (without reading the rest), 408 when it trickles in
 * too slowly, 400 for malformed JSON or a non-object.
 */
export function jsonBody(limitBytes: number, timeoutMs: number): GatewayMiddleware {
  return async function readJsonBody(ctx, next) {
    // No Content-Length and no Transfer-Encoding (curl -X POST without -d): there is no body at all, which
    // is what to say, whatever the Content-Type (ctx.is answers null for a bodiless request).
    if (ctx.get('content-length') === '' && ctx.get('transfer-encoding') === '') throw emptyBody();
    if (!ctx.is('application/json')) {
      throw new HttpProblem(415, 'unsupported_media_type', 'the request body must be JSON (Content-Type: application/json)');
    }
    const encoding = ctx.get('content-encoding').trim().toLowerCase();
    if (encoding !== '' && encoding !== 'identity') {
      // RFC 9110 section 15.5.16: say which codings would have been accepted.
      throw new HttpProblem(415, 'unsupported_media_type', 'the request body must not be encoded (Content-Encoding: identity or none)', {
        headers: { 'Accept-Encoding': 'identity' },
      });
    }
    const declared = Number(ctx.get('content-length') || 0);
    if (declared > limitBytes) throw tooLarge(limitBytes);
    continueIfExpected(ctx.state);
    const raw = await readLimited(ctx.req, limitBytes, timeoutMs);
    if (raw.toString('utf8').trim() === '') throw emptyBody();
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new HttpProblem(400, 'malformed_json', 'the request body is not valid JSON');
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new HttpProblem(400, 'invalid_request', 'the request body must be a JSON object');
    }
    ctx.state.body = parsed as Record<string, unknown>;
    await next();
  };
}

/** The fields a handler needs, each a non-empty string; 400 naming the first that is not. */
export function requireStrings<K extends string>(body: Record<string, unknown> | undefined, ...fields: K[]): Record<K, string> {
  const out = {} as Record<K, string>;
  for (const field of fields) {
    const value = body?.[field];
    if (value === undefined || value === null) throw new HttpProblem(400, 'invalid_request', `${field} is required`);
    if (typeof value !== 'string') throw new HttpProblem(400, 'invalid_request', `${field} must be a string`);
    if (value === '') throw new HttpProblem(400, 'invalid_request', `${field} must not be empty`);
    out[field] = value;
  }
  return out;
}

function emptyBody(): HttpProblem {
  return new HttpProblem(400, 'invalid_request', 'the request body is missing or empty: send a JSON object (Content-Type: application/json)');
}

function tooLarge(limitBytes: number): HttpProblem {
  // The rest of the body is never read: close the connection after answering.
  return new HttpProblem(413, 'payload_too_large', `the request body is larger than ${limitBytes} bytes`, {
    headers: { Connection: 'close' },
  });
}

export function readLimited(req: IncomingMessage, limitBytes: number, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => {
      cleanup();
      req.pause();
      reject(new HttpProblem(408, 'request_timeout', `the request body did not arrive within ${timeoutMs} ms`, { headers: { Connection: 'close' } }));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        cleanup();
        req.pause();
        reject(tooLarge(limitBytes));
      } else {
        chunks.push(chunk);
      }
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = () => {
      cleanup();
      reject(new HttpProblem(400, 'invalid_request', 'the request body was not received completely'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onError);
  });
}
