// What the floor and the Koa reference share, so the two differ by Koa and nothing else: a bare
// http-proxy over one keep-alive agent with an 'error' listener (and, as every gateway process, one held
// nextTick entry), and how such a process says its port.
import { Agent, ServerResponse, type Server } from 'node:http';
import httpProxy from 'http-proxy';
import { holdTickShape } from '../src/core/tick-shape.js';

export function passthroughProxy(target: string): httpProxy {
  // As the gateway does at start-up: after an idle period with a full collection, a Node 20 process that
  // does not hold a nextTick entry spends about 5 % more CPU per request for good (src/core/tick-shape.ts).
  // Both sides hold one, so a ratio never depends on which process the collector happened to catch idle.
  void holdTickShape();
  const proxy = httpProxy.createProxyServer({ target, agent: new Agent({ keepAlive: true }) });
  proxy.on('error', (_err, _req, res) => {
    if (res instanceof ServerResponse && !res.headersSent) {
      res.writeHead(502, { 'Content-Length': '0' });
      res.end();
    } else {
      res.destroy();
    }
  });
  return proxy;
}

/** Prints {"port":N} once listening (the bench reads it), and exits on SIGTERM. */
export function announce(server: Server): void {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
  process.on('SIGTERM', () => process.exit(0));
}
