import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { startRedis, type TestRedis } from './redis-server.js';

const run = promisify(execFile);

/** A real Redis Cluster of the test's own: `masters` redis-servers on loopback, every slot assigned. */
export interface TestCluster {
  nodes: TestRedis[];
  /** Seed URLs for store.cluster.nodes. */
  urls: string[];
  destroy(): Promise<void>;
}

export async function startCluster(masters = 3): Promise<TestCluster> {
  const nodes: TestRedis[] = [];
  try {
    for (let i = 0; i < masters; i++) {
      nodes.push(await startRedis({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000'] }));
    }
    await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    await untilClusterOk(nodes);
  } catch (err) {
    await Promise.all(nodes.map((n) => n.destroy()));
    throw err;
  }
  return {
    nodes,
    urls: nodes.map((n) => n.url),
    destroy: async () => {
      await Promise.all(nodes.map((n) => n.destroy()));
    },
  };
}

/** Every node says cluster_state:ok and knows every other node (gossip has converged). */
async function untilClusterOk(nodes: TestRedis[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (const n of nodes) {
    const r = new Redis(n.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await r.connect();
      for (;;) {
        const info = String(await r.call('CLUSTER', 'INFO'));
        const known = String(await r.call('CLUSTER', 'NODES')).trim().split('\n').length;
        if (info.includes('cluster_state:ok') && known === nodes.length) break;
        if (Date.now() > deadline) throw new Error(`cluster did not converge: ${info}`);
        await new Promise((res) => setTimeout(res, 50));
      }
    } finally {
      r.disconnect();
    }
  }
}
