import type { Socket } from 'node:net';
import type { Logger } from '../log.js';
import { HttpProblem, type ProblemCode, writeRawProblem } from './problem.js';

/**
 * Requests Node's parser refuses before Koa sees them (oversized headers, smuggling attempts, bad
 * framing) still get a problem body, then the connection is closed.
 */
export function clientErrorResponder(log: Logger): (err: NodeJS.ErrnoException, socket: Socket) => void {
  return (err, socket) => {
    if (!socket.writable || (err as { code?: string }).code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const [status, code, detail]: [number, ProblemCode, string] =
      err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'headers_too_large', 'the request headers are too large']
        : err.code === 'HPE_URI_TOO_LONG' ? [414, 'uri_too_long', 'the request URI is too long']
          : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'request_timeout', 'the request headers did not arrive in time']
            : [400, 'invalid_request', 'the request is not valid HTTP/1.1'];
    log.debug('client error', { code: err.code, status });
    writeRawProblem(socket, new HttpProblem(status, code, detail));
  };
}
