import type { Logger } from '../../log.js';
import { failureCause } from './failure.js';

/**
 * A success this long after the last failure ends an outage, and so does a reconnect followed by this
 * long without a failure. A reconnect alone does not: a Sentinel connection that lands on a demoted
 * master, or a Cluster with one master down, reconnects and keeps failing; and in a partial outage
 * commands on the served slots succeed all along.
 */
const QUIET_MS = 1000;

/**
 * One error line when the store starts failing (with its cause: MOVED, READONLY, CLUSTERDOWN, timeout,
 * refused... and what that means for requests), one info line when it serves again. Commands still in
 * flight when an outage begins may succeed without ending it.
 */
export class OutageLog {
  private down = false;
  private everConnected = false;
  private lastFailureAt = 0;

  constructor(
    private readonly log: Logger,
    private readonly what: string,
    /** What a failure means for requests, e.g. "session operations that need it answer 503 until it returns". */
    private readonly consequence: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** A command failed: before the first connection that is still starting up, not an outage. */
  commandFailed(err: unknown): void {
    if (this.everConnected) this.failed(err);
  }

  /** The connection failed. */
  failed(err: unknown): void {
    this.lastFailureAt = this.now();
    if (this.down) return;
    this.down = true;
    const error = err instanceof Error ? err.message : String(err);
    const cause = failureCause(err);
    this.log.error(`${this.what} unavailable (${cause}); ${this.consequence}`, { cause, error });
  }

  /** A command succeeded. */
  answered(): void {
    if (this.down && this.now() - this.lastFailureAt >= QUIET_MS) this.recovered();
  }

  /**
   * The connection is (again) ready: commands may fail from now on without it being start-up. The
   * outage ends if nothing fails for a while from here (a demoted master or a partial outage keeps failing).
   */
  connected(): void {
    this.everConnected = true;
    if (!this.down) return;
    const readyAt = this.now();
    setTimeout(() => {
      if (this.down && this.lastFailureAt < readyAt) this.recovered();
    }, QUIET_MS).unref();
  }

  private recovered(): void {
    this.down = false;
    this.log.info(`${this.what} available again`);
  }
}
