// The floor: bare http-proxy passthrough over a keep-alive agent, an 'error' listener, nothing else.
// Usage: node floor.js http://127.0.0.1:UPSTREAM_PORT ; prints {"port":N} once listening.
import { createServer } from 'node:http';
import { announce, passthroughProxy } from './passthrough.js';

const target = process.argv[2];
if (!target) throw new Error('usage: floor.js UPSTREAM_URL');
const proxy = passthroughProxy(target);
const server = createServer((req, res) => proxy.web(req, res));
// WebSocket handshakes the way http-proxy's README does them (the websocket scenario's floor).
server.on('upgrade', (req, socket, head) => proxy.ws(req, socket, head));
server.listen(0, '127.0.0.1', () => announce(server));
