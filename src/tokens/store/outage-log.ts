import type { Logger } from '../../log.js';
import { failureCause } from './failure.js';

/** A success this long after the last failure ends an outage that no reconnect announced. */
const QUIET_MS = 1000;

/**
 * One error line when the store starts failing (with its cause: MOVED, READONLY, timeout, refused...),
 * one info line when it serves again: a reconnect, or commands succeeding for a while (a misrouted or
 * timing-out store never disconnects). Commands still in flight when an outage begins may succeed
 * without ending it.
 */
export class OutageLog {
  private down = false;
  private everConnected = false;
  private lastFailureAt = 0;

  constructor(private readonly log: Logger, private readonly what: string, private readonly now: () => number = Date.now) {}

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
    this.log.error(`${this.what} unavailable; token checks fail closed until it returns`, { cause: failureCause(err), error });
  }

  /** A command succeeded. */
  answered(): void {
    if (this.down && this.now() - this.lastFailureAt >= QUIET_MS) this.recovered();
  }

  /** The connection is (again) ready. */
  reconnected(): void {
    this.everConnected = true;
    if (this.down) this.recovered();
  }

  private recovered(): void {
    this.down = false;
    this.log.info(`${this.what} available again`);
  }
}
