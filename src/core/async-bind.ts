import { AsyncResource } from 'node:async_hooks';

const DEP0172 = 'The asyncResource property on bound functions is deprecated';

/**
 * Makes `AsyncResource.prototype.bind` cheap where Node's own is the slow one (Node 20 to 23, and 24
 * before the fix below), keeping what it does. Node's HTTP/2 client calls it once per request (`ClientHttp2Session.request` binds the
 * stream's start to a new AsyncResource), so every request to an `h2c`/`h2` upstream pays it.
 *
 * The cost: Node's `bind` defines the bound function's deprecated `asyncResource` property (DEP0172)
 * with two `util.deprecate` wrappers made anew on every call, and each wrapper sets its own prototype to
 * a function that was just made (`Object.setPrototypeOf`). V8 records a prototype transition for each:
 * perf found 9.6 µs of a gateway's ~200 µs per unary gRPC call under it (8.4 µs in a bare node:http2
 * pass-through), and the CPU per call fell by about 15 % without it, in both. Node itself stopped
 * setting those prototypes in 24 (nodejs/node#59195, for #58218) and drops the property in later
 * releases.
 *
 * Everything else is as Node's: the argument check, the bound function's behaviour (it runs `fn` in the
 * resource's scope, with the caller's `this` or `thisArg`), its `length`, and an enumerable
 * `asyncResource` accessor that returns (or replaces) the resource and emits DEP0172 once per process,
 * through `process.emitWarning` (so `--no-deprecation` and `--throw-deprecation` hold).
 *
 * Installed once, at start (it replaces a method of a Node class for the whole process); where Node's
 * `bind` does not make those wrappers, nothing is replaced. Returns whether it replaced it.
 */
export function installAsyncResourceBind(): boolean {
  const proto = AsyncResource.prototype;
  if (proto.bind === (bind as unknown) || !slowBind(proto.bind)) return false;
  proto.bind = bind as typeof proto.bind;
  return true;
}

/**
 * Node's `bind` while it builds `deprecate` wrappers (20 to 24; 24 keeps the wrappers without the
 * prototypes, and replacing it there is harmless). Once the property is gone it has none.
 */
function slowBind(current: unknown): boolean {
  return Function.prototype.toString.call(current).includes('deprecate(');
}

let warned = false;

function warnOnce(): void {
  if (warned) return;
  warned = true;
  process.emitWarning(DEP0172, 'DeprecationWarning', 'DEP0172');
}

function bind(this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown): (...args: unknown[]) => unknown {
  if (typeof fn !== 'function') {
    const err = new TypeError(`The "fn" argument must be of type function. Received ${describe(fn)}`) as TypeError & { code: string };
    err.code = 'ERR_INVALID_ARG_TYPE';
    throw err;
  }
  const resource = this;
  let bound: (...args: unknown[]) => unknown;
  if (thisArg === undefined) {
    bound = function (this: unknown, ...args: unknown[]) {
      return resource.runInAsyncScope(fn, this, ...args);
    };
  } else {
    bound = resource.runInAsyncScope.bind(resource, fn, thisArg) as (...args: unknown[]) => unknown;
  }
  let self = resource;
  Object.defineProperties(bound, {
    length: { configurable: true, enumerable: false, value: fn.length, writable: false },
    asyncResource: {
      configurable: true,
      enumerable: true,
      get() {
        warnOnce();
        return self;
      },
      set(value: AsyncResource) {
        warnOnce();
        self = value;
      },
    },
  });
  return bound;
}

/** As Node's own message names what it got instead of a function. */
function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'object') return 'an instance of ' + ((value as object).constructor?.name ?? 'Object');
  return `type ${typeof value} (${String(value)})`;
}
