import type { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import type { ReplicationOutcome, ReplicationStats } from '../store-contracts.js';

/** What to do with a session write while fewer replicas than store.waitForReplicas are connected. */
export type Durability = 'available' | 'strict';

/** What /readyz says while strict refuses session writes (undefined: nothing is refused). */
export function refusedWrites(stats: ReplicationStats | undefined): string | undefined {
  if (!stats?.refusing) return undefined;
  return `sign-ins, refreshes and revocations are refused (503 store_unavailable): ${stats.connected} of ${stats.wanted} replicas connected (store.waitForReplicas) and store.durability is strict; bearer requests are served`;
}

/** How often the master's connected replicas are looked at (INFO replication). */
const LOOK_EVERY_MS = 1000;

interface Waiter {
  resolve(acked: number): void;
  reject(err: unknown): void;
}

/**
 * store.waitForReplicas, on a connection of its own. Redis's WAIT blocks the connection it is sent on,
 * so it never runs on the connection that carries other callers' commands. WAIT covers the writes of
 * its own connection; the replication stream is ordered, so a marker written on this connection after
 * a caller's write was answered, once acknowledged, proves the caller's write reached the replicas too.
 * One round (marker + WAIT) serves every caller that asked before it started: waits coalesce, so N
 * concurrent session writes cost one WAIT, not N.
 *
 * While fewer replicas are connected than wanted (a failover left the new master alone):
 * - `available` (default): writes are acknowledged without waiting, one warning per shortfall, counted
 *   as `unreplicated`. A failover in that window may lose them (a session lost: its user signs in again;
 *   a revocation lost: the session is live again until it expires or is revoked once more).
 * - `strict`: session writes are refused before anything is written (503, counted as `refused`).
 */
export class ReplicaWaits {
  private connected: number | undefined;
  private short = false;
  private readonly outcomes: Record<ReplicationOutcome, number> = { replicated: 0, unreplicated: 0, refused: 0 };
  private readonly waiting: Waiter[] = [];
  private running = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly conn: Redis,
    private readonly wanted: number,
    private readonly durability: Durability,
    private readonly waitMs: number,
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => void this.look(), LOOK_EVERY_MS);
    this.timer.unref();
    conn.on('ready', () => void this.look());
  }

  stats(): ReplicationStats {
    return { wanted: this.wanted, connected: this.connected, outcomes: { ...this.outcomes }, refusing: this.durability === 'strict' && this.missing() };
  }

  /** Before a session write: in strict mode, refuses while replicas are known to be missing (nothing written). */
  admit(): void {
    if (this.durability === 'strict' && this.missing()) {
      this.outcomes.refused++;
      throw new Error(`NOREPLICAS ${this.connected} of ${this.wanted} replicas connected (store.durability strict)`);
    }
  }

  /**
   * After a session write was answered: resolves once it reached `wanted` replicas, or (available) at
   * once while they are missing, or when they did not acknowledge in time. Strict: a shortfall throws.
   */
  async after(): Promise<void> {
    let acked = this.connected ?? 0;
    if (!this.missing()) {
      try {
        acked = await this.barrier();
      } catch (err) {
        if (this.durability === 'strict') throw err;
        acked = 0;
      }
    }
    if (acked >= this.wanted) {
      this.outcomes.replicated++;
      return;
    }
    if (this.durability === 'strict') {
      this.outcomes.refused++;
      throw new Error(`NOREPLICAS ${acked} of ${this.wanted} replicas acknowledged the write (store.durability strict)`);
    }
    this.outcomes.unreplicated++;
  }

  close(): void {
    clearInterval(this.timer);
  }

  private missing(): boolean {
    return this.connected !== undefined && this.connected < this.wanted;
  }

  private barrier(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      void this.pump();
    });
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0);
        try {
          await this.conn.set('replicated', '1', 'PX', 60_000);
          const acked = Number(await this.conn.call('WAIT', this.wanted, this.waitMs));
          for (const w of batch) w.resolve(acked);
        } catch (err) {
          for (const w of batch) w.reject(err);
        }
      }
    } finally {
      this.running = false;
    }
  }

  private async look(): Promise<void> {
    if (this.conn.status !== 'ready') return;
    try {
      const info = await this.conn.info('replication');
      // Replicas still syncing are connected but hold nothing yet: only `state=online` ones count.
      this.connected = (info.match(/^slave\d+:.*state=online/gm) ?? []).length;
      if (!this.missing() && this.short) {
        this.short = false;
        this.log.info('redis replicas back: session writes wait for them again', { replicas: this.connected, waitForReplicas: this.wanted });
      } else if (this.missing()) this.shortfall(this.connected);
    } catch {
      // The command connection's outage log tells of an unreachable master.
    }
  }

  private shortfall(replicas: number): void {
    if (this.short) return;
    this.short = true;
    this.log.warn(this.durability === 'strict'
      ? 'redis has fewer replicas than store.waitForReplicas: sign-ins, refreshes and revocations are refused (store.durability strict) until they return; a replica lost for good needs an operator (attach a replica, or lower store.waitForReplicas, or set store.durability available)'
      : 'redis has fewer replicas than store.waitForReplicas: session writes are acknowledged without them (store.durability available) until they return', { replicas, waitForReplicas: this.wanted });
  }
}
