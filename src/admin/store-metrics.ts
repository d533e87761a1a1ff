import type { Metrics } from './metrics.js';

/** Methods that answer at once from memory: not store commands. */
const UNTIMED = new Set(['isLiveNow']);

/**
 * The store as the gateway sees it, each call timed by command name. A Proxy rather than a class that
 * re-implements the store's interface, so methods added to the interface are timed without an edit here, and
 * `instanceof` still sees the real store. Methods run on the real store (`this` is never the Proxy).
 */
export function instrumentStore<S extends object>(store: S, metrics: Metrics): S {
  const timed = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || typeof property !== 'string' || property === 'close' || property === 'constructor') return value;
      let wrapper = timed.get(property);
      if (!wrapper && UNTIMED.has(property)) {
        // Answers without waiting (a cache): nothing to time, and the hot path pays no clock reads.
        wrapper = (value as (...a: unknown[]) => unknown).bind(target);
        timed.set(property, wrapper);
      } else if (!wrapper) {
        const command = property;
        // The labelled children, looked up once: a call costs two clock reads and one observe.
        const ok = metrics.storeCommandDuration.labels({ command, result: 'ok' });
        const failed = metrics.storeCommandDuration.labels({ command, result: 'error' });
        const method = value as (...a: unknown[]) => unknown;
        wrapper = function timedCall(...args: unknown[]): unknown {
          const started = performance.now();
          const out: unknown = method.apply(target, args);
          if (out instanceof Promise) {
            return out.then((v: unknown) => {
              ok.observe((performance.now() - started) / 1000);
              return v;
            }, (err: unknown) => {
              failed.observe((performance.now() - started) / 1000);
              throw err;
            });
          }
          return out;
        };
        timed.set(property, wrapper);
      }
      return wrapper;
    },
  });
}
