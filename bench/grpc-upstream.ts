// The cheap HTTP/2 (h2c) upstream of the gRPC rows: a unary gRPC answer (one small message frame, then
// trailers `grpc-status: 0`) for any POST, and the same 20-record page envelope as upstream.ts for any GET.
// Prints {"port":N} on stdout once listening on 127.0.0.1.
import { createServer } from 'node:http2';

const reply = Buffer.from([0, 0, 0, 0, 7, 0x0a, 0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f]); // frame of test.Msg { text: "hello" }
const page = Buffer.from(JSON.stringify({
  content: Array.from({ length: 20 }, (_, i) => ({ id: `conv-${String(i + 1).padStart(6, '0')}`, campaignId: `cmp-${String(1000 - i).padStart(4, '0')}`, subject: `Order #${40_000 + i}: delivery window and invoice address`, status: 'open', createdAt: new Date(Date.UTC(2024, 0, 1) + i * 3_600_000).toISOString() })),
  pageable: { pageNumber: 0, pageSize: 20, offset: 0 }, totalPages: 50, totalElements: 1000, numberOfElements: 20, last: false, first: true,
}));

const server = createServer({ settings: { maxConcurrentStreams: 1000 } });
server.on('stream', (stream, headers) => {
  stream.on('error', () => {});
  if (headers[':method'] === 'POST') {
    stream.resume();
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(reply);
    });
    return;
  }
  stream.respond({ ':status': 200, 'content-type': 'application/json', 'content-length': String(page.length) });
  stream.end(page);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
