import { createServer, connect, type Server, type Socket } from 'node:net';

/** A TCP proxy on loopback that delivers what the server sends `delayMs` late (in order): a slow link. */
export interface SlowLink {
  url: string;
  close(): Promise<void>;
}

export async function slowLink(targetPort: number, delayMs: number): Promise<SlowLink> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      setTimeout(() => {
        if (!client.destroyed) client.write(chunk);
      }, delayMs);
    });
    const end = () => {
      setTimeout(() => {
        client.destroy();
        upstream.destroy();
      }, delayMs);
    };
    upstream.on('close', end);
    upstream.on('error', end);
    client.on('close', () => upstream.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
