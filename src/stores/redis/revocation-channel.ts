import type { Redis } from 'ioredis';
import { closeClient } from './clients.js';
import type { LivenessCache } from './liveness-cache.js';

/** Where to listen: which nodes right now, and how to connect to one. */
export interface ListenTargets {
  /**
   * The nodes a revocation can be published on (one name for a single node or a Sentinel master; every
   * master of a Cluster); empty while unknown, which keeps the cache off.
   */
  current(): string[];
  connect(target: string): Redis;
}

interface Listener {
  redis: Redis;
  subscribed: boolean;
  /** When the most recent heartbeat PING that came back was sent (monotonic ms); -Infinity: none yet. */
  confirmedSentAt: number;
  pinging: boolean;
}

/**
 * The revocation channel: a plain connection per target node subscribed to `<keyPrefix>revoked`, each
 * proving every heartbeat that it is alive. A PONG comes back on the same connection after every message
 * published on that node before the PING was processed, so "the PING sent at t came back" means "every
 * revocation published there before t has been applied to the cache". The cache is on only while every
 * target is subscribed; each cache hit also requires the oldest of those confirmations to be recent
 * (LivenessCache.confirm), which is what lets a revoking instance answer after a fixed wait.
 *
 * ioredis's own Cluster subscriber moves between nodes silently and swallows errors; plain connections
 * to chosen nodes keep "the cache is off while the channel is down" true in every topology.
 */
export class RevocationChannel {
  private readonly listeners = new Map<string, Listener>();
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly targets: ListenTargets,
    private readonly channel: string,
    private readonly cache: LivenessCache,
    heartbeatMs: number,
    private readonly pingTimeoutMs: number,
    private readonly now: () => number,
    /** Told each revoked session id heard on the channel (WebSocket tunnels end on it). */
    private readonly heard: (sid: string) => void = () => {},
  ) {
    this.timer = setInterval(() => this.tick(), heartbeatMs);
    this.timer.unref();
    this.tick();
  }

  /** Every listener's connection (tests cut them). */
  get connections(): Redis[] {
    return [...this.listeners.values()].map((l) => l.redis);
  }

  get up(): boolean {
    return this.listeners.size > 0 && [...this.listeners.values()].every((l) => l.subscribed);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.cache.deactivate();
    await Promise.all([...this.listeners.values()].map((l) => closeClient(l.redis)));
    this.listeners.clear();
  }

  private tick(): void {
    if (this.closed) return;
    this.reconcile();
    for (const l of this.listeners.values()) this.heartbeat(l);
    this.publishState();
  }

  /** Listens on exactly the current targets: new masters get a listener, departed ones lose theirs. */
  private reconcile(): void {
    const wanted = new Set(this.targets.current());
    for (const [target, l] of this.listeners) {
      if (wanted.has(target)) continue;
      this.listeners.delete(target);
      void closeClient(l.redis);
    }
    for (const target of wanted) if (!this.listeners.has(target)) this.listen(target);
  }

  private listen(target: string): void {
    const redis = this.targets.connect(target);
    const l: Listener = { redis, subscribed: false, confirmedSentAt: -Infinity, pinging: false };
    this.listeners.set(target, l);
    const down = () => {
      l.subscribed = false;
      l.confirmedSentAt = -Infinity;
      this.publishState();
    };
    redis.on('error', down);
    for (const event of ['close', 'reconnecting', 'end']) redis.on(event, down);
    redis.on('message', (_channel: string, sid: string) => {
      this.cache.invalidate(sid);
      this.heard(sid);
    });
    redis.on('ready', () => {
      const sentAt = this.now();
      redis.subscribe(this.channel).then(() => {
        if (this.listeners.get(target) !== l || redis.status !== 'ready') return;
        l.subscribed = true;
        l.confirmedSentAt = sentAt;
        // Messages may have been missed while this listener was away: start from nothing.
        this.cache.activate();
        this.publishState();
      }, () => this.drop(l));
    });
  }

  private heartbeat(l: Listener): void {
    if (!l.subscribed || l.pinging || l.redis.status !== 'ready') return;
    l.pinging = true;
    const sentAt = this.now();
    // An idle socket can die silently (NAT, load balancers): a PING that does not come back in time
    // turns the cache off and reconnects, so a dead channel never passes for a quiet one.
    const timer = setTimeout(() => this.drop(l), this.pingTimeoutMs);
    l.redis.ping().then(() => {
      clearTimeout(timer);
      l.pinging = false;
      if (l.subscribed) l.confirmedSentAt = Math.max(l.confirmedSentAt, sentAt);
      this.publishState();
    }, () => {
      clearTimeout(timer);
      l.pinging = false;
      this.drop(l);
    });
  }

  private drop(l: Listener): void {
    l.subscribed = false;
    l.confirmedSentAt = -Infinity;
    this.publishState();
    if (l.redis.status === 'ready') l.redis.disconnect(true);
  }

  /** The cache is on while every listener is subscribed, trusted up to the oldest confirmation. */
  private publishState(): void {
    if (this.closed) return;
    if (!this.up) {
      this.cache.deactivate();
      return;
    }
    let oldest = Infinity;
    for (const l of this.listeners.values()) oldest = Math.min(oldest, l.confirmedSentAt);
    this.cache.confirm(oldest);
  }
}
