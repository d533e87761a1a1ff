import { Redis, type Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '../support/redis-cluster.js';
import { sessionPlace } from '../../src/stores/sessions/user-index.js';
import { redisContracts } from './redis-harness.js';

let cluster: TestCluster;

const under = redisContracts('redis (3-master cluster)', {
  async start() {
    cluster = await startCluster(3);
    // The contract is about answers, not deadlines (test/reliability/cluster-faults.test.ts holds those): on a
    // machine busy with the rest of the suite, a 1 s connect or 500 ms command limit failed a take now and then.
    return { topology: { mode: 'cluster', nodes: cluster.urls.slice(0, 1) }, commandTimeoutMs: 2000, connectTimeoutMs: 5000 };
  },
  async ready(store, counters) {
    // A Cluster client connects to a master when it first sends it a command, and never resends a command
    // whose connection closed (a replayed rotation would look like reuse): connect every master up front,
    // so no test's first command on a master races that connection.
    for (const client of [store.client, counters.client]) {
      await Promise.all((client as Cluster).nodes('master').map((node) => node.ping()));
    }
  },
  stop: () => cluster?.destroy(),
});
const store = () => under.store();
const counters = () => under.counters();

describe('RedisSessionStore on a cluster', () => {
  it('spreads sessions (their users\' hashes) and counters over every master', async () => {
    for (let i = 0; i < 30; i++) {
      await store().createSession({ sub: `user${i}`, uv: 'v' }, 60);
      await counters().hit(`k${i}`, 60);
    }
    for (const n of cluster.nodes) {
      const raw = new Redis(n.url);
      try {
        expect(await raw.keys('gwtest:ss:*')).not.toEqual([]);
        expect(await raw.keys('gwtest:c:*')).not.toEqual([]);
      } finally {
        raw.disconnect();
      }
    }
  });

  it('keeps each session\'s legacy record and index entry on its hash\'s slot, and honours the record\'s deletion (c247b92\'s revocation)', async () => {
    // The store's own client (keyPrefix gwtest:): a cross-slot command would fail here with CROSSSLOT.
    const client = store().client;
    for (let i = 0; i < 12; i++) {
      const user = `legacy-user${i}`;
      const sid = await store().createSession({ sub: user, uv: 'v' }, 60);
      const place = sessionPlace(sid)!;
      expect(place.legacy).toBeDefined();
      expect(await client.exists(place.legacy!.record)).toBe(1);
      expect(await client.zscore(place.legacy!.index, sid)).not.toBeNull();
      expect(await store().rotateRefresh(sid, { generation: 0, ttlSeconds: 60, graceMs: 0, nowMs: Date.now() })).toMatchObject({ result: 'rotated' });
      if (i % 2 === 0) {
        await client.del(place.legacy!.record);
        expect(await store().isLive(sid)).toBe(false);
        expect(await store().listSessions(user)).toEqual([]);
      } else {
        expect(await store().isLive(sid)).toBe(true);
        expect(await store().revokeUser(user)).toBe(1);
        expect(await client.exists(place.legacy!.record)).toBe(0);
      }
    }
  });

  it('listens for revocations on every master', async () => {
    await expect.poll(() => store().channel.connections.length, { timeout: 5000 }).toBe(3);
    await expect.poll(() => store().channel.up, { timeout: 5000 }).toBe(true);
    const ports = store().channel.connections.map((c) => c.options.port).sort();
    expect(ports).toEqual(cluster.nodes.map((n) => n.port).sort());
  });
});
