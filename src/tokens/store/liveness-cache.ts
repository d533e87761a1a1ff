/**
 * Which sessions were live a moment ago, so a bearer request need not ask Redis every time. Safe only
 * while the invalidation channel is up: every revocation publishes the session id, `invalidate` drops
 * it, and while the channel is down the cache is off and empty. An answer from Redis that raced a
 * revocation is not kept (the epoch moved while it was in flight).
 */
export class LivenessCache {
  private readonly live = new Map<string, number>();
  private active = false;
  private currentEpoch = 0;

  constructor(private readonly ttlMs: number, private readonly maxEntries = 100_000) {}

  get enabled(): boolean {
    return this.active && this.ttlMs > 0;
  }

  get epoch(): number {
    return this.currentEpoch;
  }

  isLive(sid: string, nowMs: number): boolean {
    if (!this.active) return false;
    const until = this.live.get(sid);
    if (until === undefined) return false;
    if (until > nowMs) return true;
    this.live.delete(sid);
    return false;
  }

  /** Keeps a live answer for at most ttlMs and never past the session's own expiry. */
  remember(sid: string, nowMs: number, sessionTtlMs: number, epochAtLookup: number): void {
    if (!this.enabled || epochAtLookup !== this.currentEpoch) return;
    if (this.live.size >= this.maxEntries) this.live.delete(this.live.keys().next().value!);
    this.live.set(sid, nowMs + Math.min(this.ttlMs, sessionTtlMs));
  }

  invalidate(sid: string): void {
    this.currentEpoch++;
    this.live.delete(sid);
  }

  /** The channel is (again) subscribed: start from nothing, since messages may have been missed. */
  activate(): void {
    this.currentEpoch++;
    this.live.clear();
    this.active = true;
  }

  deactivate(): void {
    this.currentEpoch++;
    this.live.clear();
    this.active = false;
  }
}
