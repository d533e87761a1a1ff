// The TLS floors: the same bare http-proxy passthrough as floor.ts behind a TLS listener.
// Usage: node tls-floor.js UPSTREAM_URL CERT_FILE KEY_FILE h1|h2 ; prints {"port":N} once listening.
//  - h1: node:https, HTTP/1.1 only (what wrk speaks);
//  - h2: node:http2's compatibility API, HTTP/2 only (what h2load speaks), with the least any HTTP/2
//    front of http-proxy needs: the request's pseudo-headers are not copied to the upstream, and the
//    connection-specific headers http-proxy and the upstream set (`Connection`, `Keep-Alive`,
//    `Transfer-Encoding`) are dropped instead of thrown on. Nothing else.
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { createSecureServer, Http2ServerResponse, type Http2ServerRequest } from 'node:http2';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { announce, passthroughProxy } from './passthrough.js';

const [target, certFile, keyFile, mode] = process.argv.slice(2);
if (!target || !certFile || !keyFile || (mode !== 'h1' && mode !== 'h2')) throw new Error('usage: tls-floor.js UPSTREAM_URL CERT_FILE KEY_FILE h1|h2');
const tls = { cert: readFileSync(certFile), key: readFileSync(keyFile) };
const proxy = passthroughProxy(target);

const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

class FloorResponse extends Http2ServerResponse {
  override setHeader(name: string, value: number | string | readonly string[]): this {
    if (!CONNECTION_SPECIFIC.has(name.toLowerCase())) super.setHeader(name, value);
    return this;
  }
}

function regularHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const name of Object.keys(headers)) if (name[0] !== ':') out[name] = headers[name];
  return out;
}

let server: Server;
if (mode === 'h1') {
  server = createHttpsServer(tls, (req, res) => proxy.web(req, res));
} else {
  const h2 = createSecureServer({ ...tls, Http2ServerResponse: FloorResponse as unknown as typeof Http2ServerResponse }, (req: Http2ServerRequest, res) => {
    Object.defineProperty(req, 'headers', { value: regularHeaders(req.headers) });
    proxy.web(req as unknown as IncomingMessage, res as unknown as ServerResponse);
  });
  server = h2 as unknown as Server;
}
server.listen(0, '127.0.0.1', () => announce(server as never));
