/** Hears that a session was revoked (by this instance or, through the store, by any other). */
export type RevocationListener = (sid: string) => void;

/**
 * The in-process side of the revocation channel: stores publish each revoked session id here, and
 * long-lived holders of a session (WebSocket tunnels) subscribe, so a revocation ends them at once
 * instead of at their next request. A listener that throws cannot stop the others.
 */
export class RevocationFeed {
  private readonly listeners = new Set<RevocationListener>();

  subscribe(listener: RevocationListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  publish(sid: string): void {
    for (const listener of this.listeners) {
      try {
        listener(sid);
      } catch {
        // a subscriber's own failure; the rest still hear it
      }
    }
  }
}
