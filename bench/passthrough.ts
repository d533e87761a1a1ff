// What the floor and the Koa reference share, so the two differ by Koa and nothing else: a bare
// http-proxy over one keep-alive agent with an 'error' listener, and how such a process says its port.
import { Agent, ServerResponse, type Server } from 'node:http';
import httpProxy from 'http-proxy';

export function passthroughProxy(target: string): httpProxy {
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
