import type { Attributes } from '@opentelemetry/api';

/** Runs `fn` in a span named `name` (a child of the exchange's span), when a recorded trace is active. */
type InnerSpan = <T>(name: string, attributes: Attributes, fn: () => Promise<T>) => Promise<T>;

let inner: InnerSpan | undefined;

/** The SDK (sdk.ts) hands its implementation over when it loads; until then, and with tracing off, there is none. */
export function useInnerSpans(implementation: InnerSpan): void {
  inner = implementation;
}

/**
 * Slow inner work of a request (a bcrypt check, an LDAP bind, a JWKS fetch, a store call) as a span of
 * its own when tracing is on and the request's trace is recorded; off, `fn()` and nothing else.
 */
export function traced<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
  return inner === undefined ? fn() : inner(name, attributes, fn);
}

/** Ends a span started by innerSpanStart: with the error the work failed with, if it did. */
export type InnerEnd = (err?: unknown) => void;

/** Starts a span for work already under way (a store command's promise); undefined when none is recorded. */
type InnerStart = (name: string, attributes: Attributes) => InnerEnd | undefined;

let start: InnerStart | undefined;

/** The SDK hands over how it starts such spans when it loads. */
export function useInnerSpanStart(implementation: InnerStart): void {
  start = implementation;
}

/** A span for a call already made (its promise pending), when a recorded trace is active; off: undefined at once. */
export function innerSpanStart(name: string, attributes: Attributes): InnerEnd | undefined {
  return start === undefined ? undefined : start(name, attributes);
}
