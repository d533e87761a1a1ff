import type { Cluster, Redis } from 'ioredis';

/** The clients this process closed itself (closeClient): see keepConnected. */
const closedHere = new WeakSet<Redis | Cluster>();

/** Closes a client for good: QUIT when it is connected, otherwise at once. */
export async function closeClient(client: Redis | Cluster): Promise<void> {
  closedHere.add(client);
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}

/** Resolves true once the client is ready, false after `timeoutMs`; never throws. */
export function readyWithin(client: Redis | Cluster, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on('ready', onReady);
  });
}

/** The first reconnection after an unexpected end, then up to retryStrategy's pace. */
const REVIVE_DELAY_MS = 100;

/**
 * ioredis ends a client for good, without asking retryStrategy, when its connector fails to connect.
 * With Sentinel that happens on a failover: the failover detector of the connection the dead master
 * closed hears +switch-master and disconnects the connector, and if that lands while the client is
 * asking the sentinels for the master (it is: the master just died), the client ends and every later
 * command fails ("Stream isn't writeable") until the process restarts. A client that ends without
 * closeClient is connected again, paced like retryStrategy.
 */
export function keepConnected(client: Redis): Redis {
  let attempts = 0;
  client.on('ready', () => (attempts = 0));
  client.on('end', () => {
    if (closedHere.has(client)) return;
    const timer = setTimeout(() => {
      if (closedHere.has(client) || client.status !== 'end') return;
      // A failed attempt ends it again, which schedules the next one.
      client.connect().catch(() => undefined);
    }, Math.min(++attempts * REVIVE_DELAY_MS, 1000));
    timer.unref();
  });
  return client;
}
