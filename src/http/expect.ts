import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { HttpProblem, writeProblem, writeRawProblem } from './problem.js';
import type { Exchange } from '../core/exchange.js';

const CONTINUE = /^\s*100-continue\s*$/i;

/**
 * Node answers `Expect: 100-continue` with `100 Continue` at once unless the server listens for
 * `checkContinue`: an unauthenticated client would be invited to send its whole body before its 401.
 * Here such requests go down the ordinary chain, and `continueIfExpected` sends the 100 only once the
 * request is authenticated (proxied) or about to be read (token endpoints). A refused request gets its
 * final answer with `Connection: close`, its body never read. Other expectations get 417, and CONNECT
 * (which Node hands to a `connect` listener or drops without a word) gets 405: neither is forwarded.
 */
export function handleExpectations(server: Server, handle: (req: IncomingMessage, res: ServerResponse) => void): void {
  server.on('checkContinue', handle);
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    writeProblem(res, new HttpProblem(417, 'expectation_failed', 'the only expectation the gateway meets is 100-continue', { headers: { Connection: 'close' } }));
  });
  server.on('connect', (req: IncomingMessage, socket: Socket | ServerResponse) => {
    const refused = new HttpProblem(405, 'method_not_allowed', 'CONNECT is not served: the gateway is not a forward proxy', {
      headers: { Allow: 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS' },
    });
    // HTTP/2 hands a CONNECT stream over as a request and its response.
    if (req.httpVersionMajor === 2) return writeProblem(socket as ServerResponse, refused);
    (socket as Socket).on('error', () => (socket as Socket).destroy());
    writeRawProblem(socket as Socket, refused);
  });
}

/** Sends `100 Continue` if the client waits for it (once): call when its body is wanted. */
export function continueIfExpected(ex: Exchange): void {
  const expect = ex.req.headers.expect;
  if (expect === undefined || ex.continued || !CONTINUE.test(expect)) return;
  ex.continued = true;
  ex.res.writeContinue();
}
