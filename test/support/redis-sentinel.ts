import { Redis } from 'ioredis';
import { startRedis, type TestRedis } from './redis-server.js';

export const SENTINEL_MASTER_NAME = 'gw';

/** A Sentinel-managed group of the test's own: a master, its replicas and one sentinel (quorum 1). */
export interface TestSentinel {
  master: TestRedis;
  replicas: TestRedis[];
  sentinel: TestRedis;
  /** For store.sentinel.sentinels. */
  sentinels: string[];
  /** The port the sentinels name as master right now. */
  masterPort(): Promise<number>;
  destroy(): Promise<void>;
}

export async function startSentinel(options: { downAfterMs?: number; replicas?: number } = {}): Promise<TestSentinel> {
  const started: TestRedis[] = [];
  try {
    // No diskless-sync delay (Redis's default waits 5 s for more replicas before a full sync).
    const master = await startRedis({ args: ['--repl-diskless-sync-delay', '0'] });
    started.push(master);
    const replicas: TestRedis[] = [];
    for (let i = 0; i < (options.replicas ?? 1); i++) {
      replicas.push(await startRedis({ args: ['--replicaof', '127.0.0.1', String(master.port), '--repl-diskless-sync-delay', '0'] }));
      started.push(replicas[i]!);
    }
    const sentinel = await startRedis({
      configFile: (port, dir) => ({
        text: [
          `port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, 'daemonize no', 'loglevel warning',
          `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${master.port} 1`,
          `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} ${options.downAfterMs ?? 1000}`,
          `sentinel failover-timeout ${SENTINEL_MASTER_NAME} 2000`,
          `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
          '',
        ].join('\n'),
        args: ['--sentinel'],
      }),
    });
    started.push(sentinel);
    const s: TestSentinel = {
      master,
      replicas,
      sentinel,
      sentinels: [`127.0.0.1:${sentinel.port}`],
      masterPort: async () => {
        const r = new Redis(sentinel.url, { maxRetriesPerRequest: 1 });
        try {
          const [, port] = (await r.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_MASTER_NAME)) as [string, string];
          return Number(port);
        } finally {
          r.disconnect();
        }
      },
      destroy: async () => {
        await Promise.all(started.map((n) => n.destroy()));
      },
    };
    for (const replica of replicas) await untilReplicating(replica, s, replicas.length);
    return s;
  } catch (err) {
    await Promise.all(started.map((n) => n.destroy()));
    throw err;
  }
}

/** The replica is in sync and the sentinel knows about it. */
async function untilReplicating(replica: TestRedis, s: TestSentinel, count: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  const r = new Redis(replica.url, { maxRetriesPerRequest: 1 });
  const sentinel = new Redis(s.sentinel.url, { maxRetriesPerRequest: 1 });
  try {
    for (;;) {
      const info = String(await r.info('replication'));
      const replicas = (await sentinel.call('SENTINEL', 'replicas', SENTINEL_MASTER_NAME)) as unknown[];
      if (info.includes('master_link_status:up') && replicas.length >= count) return;
      if (Date.now() > deadline) throw new Error(`replica not in sync: ${info}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  } finally {
    r.disconnect();
    sentinel.disconnect();
  }
}
