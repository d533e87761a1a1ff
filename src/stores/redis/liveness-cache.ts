/**
 * Which sessions were live a moment ago, so a bearer request need not ask Redis every time. Safe only
 * while the invalidation channel is up: every revocation publishes the session id, `invalidate` drops
 * it, and while the channel is down the cache is off and empty. An answer from Redis that raced a
 * revocation is not kept (the epoch moved while it was in flight).
 *
 * Synchronous revocation: a hit also needs the channel's most recent confirmation (a heartbeat PING
 * that came back, see RevocationChannel) to have been sent less than `freshMs` ago. A revoking instance
 * that waits `freshMs` after its revocation was published before answering therefore knows that no
 * instance can still answer from its cache for that session: any instance whose confirmation is that
 * recent has already received the message. Only durations on each instance's own clock are compared,
 * so no clock sync is needed.
 */
export class LivenessCache {
  private readonly live = new Map<string, number>();
  private active = false;
  private currentEpoch = 0;
  private confirmedSentAt = -Infinity;

  constructor(private readonly ttlMs: number, private readonly freshMs = Infinity, private readonly maxEntries = 100_000) {}

  get enabled(): boolean {
    return this.active && this.ttlMs > 0;
  }

  get epoch(): number {
    return this.currentEpoch;
  }

  isLive(sid: string, nowMs: number): boolean {
    if (!this.active || nowMs - this.confirmedSentAt >= this.freshMs) return false;
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

  /** Every message published before `sentAtMs` (this cache's clock) has been applied. */
  confirm(sentAtMs: number): void {
    this.confirmedSentAt = sentAtMs;
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
    this.confirmedSentAt = -Infinity;
  }
}
