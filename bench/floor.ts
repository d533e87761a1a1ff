// The floor: bare http-proxy passthrough over a keep-alive agent, an 'error' listener, nothing else.
// Usage: node floor.js http://127.0.0.1:UPSTREAM_PORT ; prints {"port":N} once listening.
import { Agent, createServer, ServerResponse } from 'node:http';
import httpProxy from 'http-proxy';

const target = process.argv[2];
if (!target) throw new Error('usage: floor.js UPSTREAM_URL');
const proxy = httpProxy.createProxyServer({ target, agent: new Agent({ keepAlive: true }) });
proxy.on('error', (_err, _req, res) => {
  if (res instanceof ServerResponse && !res.headersSent) {
    res.writeHead(502, { 'Content-Length': '0' });
    res.end();
  } else {
    res.destroy();
  }
});
const server = createServer((req, res) => proxy.web(req, res));
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
