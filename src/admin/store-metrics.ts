import type { Metrics } from './metrics.js';
import { innerSpanStart } from '../tracing/inner.js';

/** Methods that are not store commands (answered at once from memory, or the end of the store): called untimed. */
const UNTIMED = new Set(['isLiveNow', 'close']);

/**
 * The store as the gateway sees it, each call timed by command name: an object whose prototype is the
 * store, with one own wrapper per method the store has when it is made (its class's and its own), so
 * methods added to the interface are timed without an edit here, and `instanceof` still sees the real
 * store. Methods run on the real store (`this` is never the wrapper object). A plain object rather than
 * a Proxy: a call is a property read and a call, with no trap in between (the liveness check of every
 * Bearer request is one).
 */
export function instrumentStore<S extends object>(store: S, metrics: Metrics): S {
  const instrumented = Object.create(store) as Record<string, unknown>;
  for (const name of methodNames(store)) {
    const method = (store as Record<string, unknown>)[name] as (...a: unknown[]) => unknown;
    if (UNTIMED.has(name)) {
      // Nothing to time, and the hot path pays no clock reads.
      instrumented[name] = method.bind(store);
      continue;
    }
    // The labelled children, looked up once: a call costs two clock reads and one observe.
    const ok = metrics.storeCommandDuration.labels({ command: name, result: 'ok' });
    const failed = metrics.storeCommandDuration.labels({ command: name, result: 'error' });
    const spanName = `store.${name}`;
    const attributes = { 'db.operation.name': name };
    instrumented[name] = function timedCall(...args: unknown[]): unknown {
      const started = performance.now();
      const out: unknown = method.apply(store, args);
      if (out instanceof Promise) {
        // With tracing on, a call the request waits for is a span of its trace (`store.<command>`).
        const span = innerSpanStart(spanName, attributes);
        return out.then((v: unknown) => {
          ok.observe((performance.now() - started) / 1000);
          span?.();
          return v;
        }, (err: unknown) => {
          failed.observe((performance.now() - started) / 1000);
          span?.(err);
          throw err;
        });
      }
      return out;
    };
  }
  return instrumented as S;
}

/** The names of the functions an object has, its own and its prototypes' (up to Object's), but not the constructor. */
function methodNames(object: object): Set<string> {
  const names = new Set<string>();
  for (let o: object | null = object; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null) {
    for (const name of Object.getOwnPropertyNames(o)) {
      if (name === 'constructor' || names.has(name)) continue;
      const descriptor = Object.getOwnPropertyDescriptor(o, name);
      if (descriptor && typeof descriptor.value === 'function') names.add(name);
    }
  }
  return names;
}
