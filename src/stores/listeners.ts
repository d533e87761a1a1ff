/**
 * Listeners in this process of one kind of event, such as a revoked session id or a removed API key id:
 * a store publishes each one here, whether this instance made the change or another one did (through the
 * store's change channel), and long-lived holders subscribe. For sessions, those holders are WebSocket
 * tunnels, so a revocation ends them at once instead of at their next request. A listener that throws
 * cannot stop the others.
 */
export class Listeners<T> {
  private readonly listeners = new Set<(value: T) => void>();

  subscribe(listener: (value: T) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  publish(value: T): void {
    for (const listener of this.listeners) {
      try {
        listener(value);
      } catch {
        // a subscriber's own failure; the rest still hear it
      }
    }
  }
}
