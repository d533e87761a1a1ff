// The cheap upstream: one pre-serialized 20-record page envelope for any GET, keep-alive.
// Prints {"port":N} on stdout once listening on 127.0.0.1.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';

const STATUSES = ['open', 'closed', 'pending'] as const;
const records = Array.from({ length: 20 }, (_, i) => ({
  id: `conv-${String(i + 1).padStart(6, '0')}`,
  campaignId: `cmp-${String(1000 - i).padStart(4, '0')}`,
  subject: `Order #${40_000 + i}: delivery window and invoice address`,
  status: STATUSES[i % 3],
  createdAt: new Date(Date.UTC(2024, 0, 1) + i * 3_600_000).toISOString(),
}));
const body = Buffer.from(JSON.stringify({
  content: records,
  pageable: { pageNumber: 0, pageSize: 20, offset: 0 },
  totalPages: 50,
  totalElements: 1000,
  numberOfElements: 20,
  last: false,
  first: true,
}));
const headers = { 'Content-Type': 'application/json', 'Content-Length': String(body.length) };

const server = createServer((req, res) => {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    req.resume();
    res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Length': '0' });
    res.end();
    return;
  }
  res.writeHead(200, headers);
  res.end(req.method === 'HEAD' ? undefined : body);
});
// WebSocket handshakes (the websocket scenario): a correct 101, then the connection stays until the client leaves.
server.on('upgrade', (req, socket) => {
  socket.on('error', () => socket.destroy());
  const accept = createHash('sha1').update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  socket.on('end', () => socket.destroy());
  socket.resume();
});
// Longer than any idle gap in the bench, so neither proxy ever reuses a socket the upstream is closing.
server.keepAliveTimeout = 60_000;
server.headersTimeout = 61_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0, bytes: body.length })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
