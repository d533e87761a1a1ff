import { DomainError } from '../core/domain-error.js';

// What every store (sessions, counters, shared tables) shares, whatever it keeps.

/** The store did not answer (a domain error: `store_unavailable`, 503 with `Retry-After: 1`). */
export class StoreUnavailableError extends DomainError {
  constructor(cause?: unknown) {
    super('store_unavailable', 'token store unavailable', { retryAfterSeconds: 1, cause });
    this.name = 'StoreUnavailableError';
  }
}

/** How the composition root holds a store: which kind it is, and how it is closed. */
export interface StoreLifecycle {
  readonly kind: 'memory' | 'redis';
  close(): Promise<void>;
}

/** How a session write fared with store.waitForReplicas. */
export type ReplicationOutcome = 'replicated' | 'unreplicated' | 'refused';

export interface ReplicationStats {
  wanted: number;
  /** Replicas connected to the master at the last look; undefined before the first. */
  connected: number | undefined;
  /** Session writes by outcome since start. */
  outcomes: Record<ReplicationOutcome, number>;
  /** store.durability strict with fewer replicas connected than wanted: session writes are refused now. */
  refusing: boolean;
}
