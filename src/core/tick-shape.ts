import { executionAsyncResource } from 'node:async_hooks';

/** The queue entry kept (see holdTickShape); never read. */
const held: { entry?: object } = {};

/**
 * Keeps one `process.nextTick` queue entry alive for the life of the process, so the engine keeps the
 * object shapes those entries are made with.
 *
 * Node makes each entry with an object literal whose first keys are computed (`{ [async_id_symbol]: …,
 * [trigger_async_id_symbol]: …, callback, args }`). V8 (11.3, Node 20) remembers the shape each of those
 * keys is added to, and holds those shapes weakly. When a full garbage collection finds no entry alive
 * (an idle process: gateways and bare http-proxy processes left idle for some minutes were found so),
 * the shapes die; the next entry finds its remembered shape gone, and V8 marks the three later keys
 * megamorphic for good. Every nextTick from then on adds them through the runtime, and Node's HTTP and
 * stream code calls nextTick several times per request: such a gateway spent about 5 % more CPU per
 * request for the rest of its life (perf: `Runtime_DefineKeyedOwnPropertyInLiteral` and what it calls
 * at 4.8 % of its CPU under load; nothing in a process that never got there).
 *
 * One entry held from start-up keeps its shape, and the shapes it was built through, alive. Where the
 * engine does not behave so it costs one small object. Calling it again holds a newer entry instead.
 */
export function holdTickShape(): Promise<void> {
  return new Promise((resolve) => {
    process.nextTick(() => {
      // Inside a nextTick callback the current async resource is the queue entry being run.
      held.entry = executionAsyncResource();
      resolve();
    });
  });
}
