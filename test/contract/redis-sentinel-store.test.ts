import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { StoreUnavailableError } from '../../src/stores/store-contracts.js';
import { RedisSessionStore } from '../../src/stores/sessions/redis-session-store.js';
import { SENTINEL_MASTER_NAME, startSentinel, type TestSentinel } from '../support/redis-sentinel.js';
import { redisContracts } from './redis-harness.js';

let pair: TestSentinel;
let store: RedisSessionStore;

redisContracts('redis (Sentinel: master and two replicas, WAIT 1)', {
  async start() {
    // Two replicas: after a failover one is in sync at once to acknowledge writes (WAIT 1), while Sentinel
    // takes its time (about 10 s) to turn a demoted master into a replica.
    pair = await startSentinel({ replicas: 2 });
    return { topology: { mode: 'sentinel', name: SENTINEL_MASTER_NAME, sentinels: pair.sentinels, tls: false }, waitForReplicas: 1 };
  },
  async ready(s) {
    store = s;
  },
  stop: () => pair?.destroy(),
});

describe('RedisSessionStore behind Sentinel', () => {
  it('talks to the master the sentinels name', async () => {
    const info = String(await store.client.info('server'));
    expect(Number(/tcp_port:(\d+)/.exec(info)![1])).toBe(await pair.masterPort());
    expect(await store.client.call('ROLE').then((r) => (r as string[])[0])).toBe('master');
  });


  it('is not ready on a replica (a url pointing at one): READONLY, logged once with its cause', async () => {
    const lines: Array<{ msg: string; cause?: string }> = [];
    const onReplica = new RedisSessionStore({
      topology: { mode: 'single', url: pair.replicas[0]!.url }, keyPrefix: 'gwtest:', commandTimeoutMs: 500, connectTimeoutMs: 1000, livenessCacheMs: 2000, waitForReplicas: 0, durability: 'available' as const,
    }, createLogger('info', (l) => lines.push(JSON.parse(l) as { msg: string; cause?: string })));
    try {
      expect(await onReplica.waitUntilReady(5000)).toBe(true);
      await expect(onReplica.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(onReplica.createSession({ sub: 'alice', uv: 'v' }, 60)).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(lines.filter((l) => l.msg.startsWith('redis unavailable')).map((l) => l.cause)).toEqual(['READONLY']);
    } finally {
      await onReplica.close();
    }
  });

  // Last: it moves the master.
  it('after a manual failover (the master demoted under it: READONLY) writes on the new master, sessions intact', async () => {
    const sid = await store.createSession({ sub: 'alice', uv: 'v1' }, 60);
    const oldPort = await pair.masterPort();
    const sentinel = new Redis(pair.sentinel.url);
    try {
      await sentinel.call('SENTINEL', 'FAILOVER', SENTINEL_MASTER_NAME);
    } finally {
      sentinel.disconnect();
    }
    const started = Date.now();
    let switchedAt = 0;
    let n = 0;
    // Until a create lands on the new master: some are refused on the way (READONLY, or WAIT finding no
    // replica while they resync), none is accepted by a node that is not master.
    for (;;) {
      const created = await store.createSession({ sub: `failover${++n}`, uv: 'v' }, 60).then(() => true, () => false);
      const switched = (await pair.masterPort()) !== oldPort;
      if (switched && !switchedAt) switchedAt = Date.now();
      if (created && switched) {
        // The client may be between connections here (ioredis reconnects when Sentinel moves the master
        // after the create landed): that check fails, and the loop asks again.
        const info = await store.client.info('server').then(String, () => '');
        const port = /tcp_port:(\d+)/.exec(info)?.[1];
        if (port !== undefined && Number(port) !== oldPort) break;
      }
      if (Date.now() - started > 10_000) throw new Error('no write on the new master within 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    console.log(`manual failover: Sentinel names the new master after ${switchedAt - started} ms; writes there ${Date.now() - switchedAt} ms later`);
    expect(await store.isLive(sid)).toBe(true);
    expect(await store.rotateRefresh(sid, { generation: 0, ttlSeconds: 60, graceMs: 0, nowMs: Date.now() })).toMatchObject({ result: 'rotated' });
  }, 20_000);
});
