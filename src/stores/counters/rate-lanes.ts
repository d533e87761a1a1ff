import type { RateDecision } from './counter-store.js';

/** Takes `n` requests from one bucket in one store command: a decision per request, in order. */
export type TakeMany = (key: string, limit: number, windowSeconds: number, n: number) => Promise<RateDecision[]>;

interface Waiter {
  resolve(decision: RateDecision): void;
  reject(err: unknown): void;
}

class Lane {
  waiting: Waiter[] = [];
  constructor(readonly limit: number, readonly windowSeconds: number) {}
}

/**
 * One command in flight per bucket. A take of an idle bucket is sent at once; takes of a bucket whose
 * command is out wait for it and then go together, as one command that decides each of them in order
 * (the same answers as one command each, all at the store's one instant). A busy client's requests thus
 * cost one round trip per batch, not one each, and a quiet one's nothing more than before.
 *
 * A command that fails (the store is down or past its deadline) fails the takes waiting behind it at once:
 * callers let requests through when the store cannot answer, so waiting out a second deadline would
 * only hold them up. A take waits at most for the command before it and its own, each under its deadline.
 * (A second command for a bucket is out only briefly: a take whose rule a reload changed goes on its own,
 * and a command that failed its deadline may still reach the store after the bucket's next one.)
 */
export class RateLanes {
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly send: TakeMany) {}

  take(key: string, limit: number, windowSeconds: number): Promise<RateDecision> {
    const lane = this.lanes.get(key);
    if (lane === undefined) {
      const opened = new Lane(limit, windowSeconds);
      this.lanes.set(key, opened);
      const sent = this.send(key, limit, windowSeconds, 1);
      sent.then(() => this.next(key, opened), (err: unknown) => this.fail(key, opened, err));
      return sent.then(first);
    }
    // The bucket's rule changed under a reload while its command is out: this one on its own.
    if (lane.limit !== limit || lane.windowSeconds !== windowSeconds) return this.send(key, limit, windowSeconds, 1).then(first);
    return new Promise<RateDecision>((resolve, reject) => {
      lane.waiting.push({ resolve, reject });
    });
  }

  /** Buckets with a command out (tests, and a check that a lane never outlives its commands). */
  get busy(): number {
    return this.lanes.size;
  }

  private next(key: string, lane: Lane): void {
    // All that waited: the script's work does not grow with their number, so none waits for a later command.
    const batch = lane.waiting;
    if (batch.length === 0) {
      this.lanes.delete(key);
      return;
    }
    lane.waiting = [];
    this.send(key, lane.limit, lane.windowSeconds, batch.length).then((decisions) => {
      for (let i = 0; i < batch.length; i++) batch[i]!.resolve(decisions[i]!);
      this.next(key, lane);
    }, (err: unknown) => {
      for (const waiter of batch) waiter.reject(err);
      this.fail(key, lane, err);
    });
  }

  private fail(key: string, lane: Lane, err: unknown): void {
    this.lanes.delete(key);
    const waiting = lane.waiting;
    lane.waiting = [];
    for (const waiter of waiting) waiter.reject(err);
  }
}

function first(decisions: RateDecision[]): RateDecision {
  return decisions[0]!;
}
