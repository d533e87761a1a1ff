// The floor of the gRPC unary row: a bare node:http2 pass-through, h2c in front and one h2c session to
// the upstream: each stream's headers (pseudo-headers but method and path dropped), body and trailers on,
// the response's headers, body and trailers back. Nothing else: no pool, no timeouts, no policy.
// As every floor and gateway process, it holds one nextTick entry (see passthrough.ts).
// With --bind-backport it also takes the gateway's replacement of Node 20's AsyncResource.bind
// (src/core/async-bind.ts), which Node's HTTP/2 client calls per request: the like-for-like reference of
// the gRPC row (bench/grpc.ts), which shows how much of the gateway's distance is its own.
// Usage: node h2c-floor.js UPSTREAM_URL [--bind-backport] ; prints {"port":N} once listening.
import { connect, constants, createServer, type ClientHttp2Session, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { installAsyncResourceBind } from '../src/core/async-bind.js';
import { holdTickShape } from '../src/core/tick-shape.js';

const [target, option] = process.argv.slice(2);
if (!target || (option !== undefined && option !== '--bind-backport')) throw new Error('usage: h2c-floor.js UPSTREAM_URL [--bind-backport]');
void holdTickShape();
if (option) installAsyncResourceBind();
let upstream = open();

/** The one session to the upstream, opened again if it went away. */
function open(): ClientHttp2Session {
  const session = connect(target!);
  session.on('error', () => {});
  return session;
}

function regular(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name of Object.keys(headers)) if (name[0] !== ':') out[name] = headers[name];
  return out;
}

const server = createServer({ settings: { maxConcurrentStreams: 1000 } });
server.on('stream', (stream, headers) => {
  stream.on('error', () => {});
  if (upstream.closed || upstream.destroyed) upstream = open();
  const proxied = upstream.request({ ...regular(headers), ':method': headers[':method'], ':path': headers[':path'] }, { endStream: stream.endAfterHeaders });
  proxied.on('error', () => {});
  // A client that resets its stream (h2load at the end of its run) cancels the upstream's.
  stream.on('close', () => {
    if (!proxied.closed) proxied.close(constants.NGHTTP2_CANCEL);
  });
  proxied.on('close', () => {
    if (!stream.closed && !stream.headersSent) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
  });
  if (!stream.endAfterHeaders) stream.pipe(proxied);
  let trailers: OutgoingHttpHeaders | undefined;
  proxied.on('response', (h) => {
    if (!stream.closed) stream.respond({ ...regular(h), ':status': h[':status'] }, { waitForTrailers: true });
  });
  proxied.on('trailers', (t) => (trailers = regular(t)));
  stream.on('wantTrailers', () => stream.sendTrailers(trailers ?? {}));
  proxied.pipe(stream);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
