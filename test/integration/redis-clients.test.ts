import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeClient } from '../../src/stores/redis/clients.js';
import { connect } from '../../src/stores/redis/topology.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { eventually, sleep } from '../reliability/helpers.js';

/**
 * ioredis ends a client for good (status `end`, no retryStrategy) when its connector gives up
 * connecting; with Sentinel the failover detector does that to a client still looking for the new
 * master (test/reliability/sentinel-one-replica.test.ts caught it: sign-ins 503 until a restart). Every
 * client the store makes is connected again after such an end; only closeClient ends one for good.
 */

let redis: TestRedis;

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.destroy();
});

const options = { keyPrefix: 'clients-test:', commandTimeoutMs: 500, connectTimeoutMs: 500 };

describe('the store\'s Redis clients', () => {
  it('connect again when ioredis ends them on its own', async () => {
    const { client, dedicated } = connect({ mode: 'single', url: redis.url }, options);
    const waiter = dedicated();
    try {
      for (const c of [client, waiter]) {
        expect(await eventually(() => c.status === 'ready', 3000, 10)).toBe(true);
        const ended = new Promise((resolve) => c.once('end', resolve));
        // What the connector's failure does: the client ends without a reconnection scheduled.
        c.disconnect();
        await ended;
        expect(await eventually(() => c.status === 'ready', 3000, 10), c.status).toBe(true);
        await c.set('k', 'v');
        expect(await c.get('k')).toBe('v');
      }
    } finally {
      await closeClient(client);
      await closeClient(waiter);
    }
  });

  it('keep trying while Redis is down after such an end, and stay closed once closeClient closed them', async () => {
    const { client } = connect({ mode: 'single', url: redis.url }, options);
    client.on('error', () => undefined);
    expect(await eventually(() => client.status === 'ready', 3000, 10)).toBe(true);
    const ended = new Promise((resolve) => client.once('end', resolve));
    client.disconnect();
    await ended;
    await redis.stop();
    await sleep(300);
    expect(client.status).not.toBe('ready');
    await redis.start();
    expect(await eventually(() => client.status === 'ready', 5000, 10), client.status).toBe(true);

    await closeClient(client);
    await sleep(500);
    expect(client.status).toBe('end');
  });
});
