import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisTopology } from '../../config/types.js';
import { keepConnected } from './clients.js';
import type { ListenTargets } from './revocation-channel.js';

export interface ConnectionOptions {
  keyPrefix: string;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
}

/** The clients of one topology: commands, and where the revocation channel listens. */
export interface Connections {
  client: Redis | Cluster;
  /** Another connection to the same master (sessions writes followed by WAIT); built on demand. */
  dedicated(): Redis;
  listen: ListenTargets;
}

/** What every connection shares: fail fast, never queue, never replay. */
function baseOptions(o: ConnectionOptions): RedisOptions {
  return {
    keyPrefix: o.keyPrefix,
    // Commands must not wait in a queue while Redis is down: the auth path fails fast and closed.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    // A command in flight when the connection drops must fail (503), never be replayed after the
    // reconnect: a replayed rotation would see its own work as reuse and revoke the session.
    autoResendUnfulfilledCommands: false,
    commandTimeout: o.commandTimeoutMs,
    connectTimeout: o.connectTimeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
  };
}

/** Username, password, TLS and database of a redis:// or rediss:// URL, as ioredis options. */
function urlOptions(url: string): RedisOptions & { host: string; port: number } {
  const u = new URL(url);
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: Number(u.port || 6379),
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: u.pathname.length > 1 ? Number(u.pathname.slice(1)) : undefined,
    tls: u.protocol === 'rediss:' ? {} : undefined,
  };
}

export function connect(topology: RedisTopology, o: ConnectionOptions): Connections {
  switch (topology.mode) {
    case 'single': return single(topology.url, o);
    case 'sentinel': return sentinel(topology, o);
    case 'cluster': return cluster(topology.nodes, o);
  }
}

function single(url: string, o: ConnectionOptions): Connections {
  const make = (extra: RedisOptions = {}) => keepConnected(new Redis(url, { ...baseOptions(o), ...extra }));
  return {
    client: make({ enableAutoPipelining: true }),
    dedicated: () => make(),
    listen: { current: () => ['node'], connect: () => make({ keyPrefix: '', autoResubscribe: false }) },
  };
}

/**
 * Sentinel: every connection asks the sentinels for the master and checks its role, so it follows the
 * master through a failover and never lands on a node that came back on an old address (a restarted
 * old master is empty until Sentinel makes it a replica: answering from it would turn valid tokens
 * into 401s). A write refused with READONLY means the node was demoted under us: reconnect (without
 * resending the command, which fails with 503).
 */
function sentinel(t: Extract<RedisTopology, { mode: 'sentinel' }>, o: ConnectionOptions): Connections {
  const make = (extra: RedisOptions = {}) => keepConnected(new Redis({
    ...baseOptions(o),
    sentinels: t.sentinels.map((s) => {
      const at = s.lastIndexOf(':');
      return { host: s.slice(0, at), port: Number(s.slice(at + 1)) };
    }),
    name: t.name,
    role: 'master',
    password: t.password,
    sentinelPassword: t.sentinelPassword,
    tls: t.tls ? {} : undefined,
    enableTLSForSentinelMode: t.tls,
    sentinelRetryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    sentinelCommandTimeout: o.commandTimeoutMs,
    // Hear +switch-master from the sentinels and move at once, rather than at the next failed command.
    failoverDetector: true,
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 1 : false),
    ...extra,
  }));
  return {
    client: make({ enableAutoPipelining: true }),
    dedicated: () => make(),
    listen: { current: () => ['master'], connect: () => make({ keyPrefix: '', autoResubscribe: false }) },
  };
}

/**
 * Cluster: reads and writes go to masters (a replica's lag would delay a revocation); redirections are
 * followed, but a command whose connection closed is not resent (a replayed rotation looks like reuse).
 * The revocation channel listens on every master with a plain connection (see RevocationChannel).
 */
function cluster(nodes: string[], o: ConnectionOptions): Connections {
  const seeds = nodes.map(urlOptions);
  const auth = { username: seeds[0]!.username, password: seeds[0]!.password, tls: seeds[0]!.tls };
  const { keyPrefix, ...nodeOptions } = baseOptions(o);
  delete nodeOptions.enableOfflineQueue;
  delete nodeOptions.retryStrategy;
  const options: ClusterOptions = {
    keyPrefix,
    scaleReads: 'master',
    enableOfflineQueue: false,
    retryDelayOnFailover: 0,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    maxRedirections: 16,
    slotsRefreshTimeout: o.commandTimeoutMs,
    clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    redisOptions: { ...nodeOptions, ...auth },
  };
  const client = new Cluster(seeds.map(({ host, port }) => ({ host, port })), options);
  return {
    client,
    dedicated: () => {
      throw new Error('store.waitForReplicas is not supported with a Redis Cluster');
    },
    listen: {
      current: () => (client.status === 'ready' ? client.nodes('master').map((n) => `${n.options.host}:${n.options.port}`) : []),
      connect: (target) => {
        const at = target.lastIndexOf(':');
        return keepConnected(new Redis({ ...baseOptions(o), ...auth, keyPrefix: '', autoResubscribe: false, host: target.slice(0, at), port: Number(target.slice(at + 1)) }));
      },
    },
  };
}
