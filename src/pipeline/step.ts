import type { GatewayContext } from '../http/state.js';

/**
 * One named step of the pipeline: it looks at the request, throws an HttpProblem to refuse it, or
 * returns. A step with nothing to await returns undefined and costs no promise; one that awaits
 * returns its promise and the next step runs when it settles.
 */
export type Step = (ctx: GatewayContext) => void | Promise<void>;

/** Runs `steps` from `from` in order; synchronous until a step returns a promise. */
export function runSteps(steps: readonly Step[], ctx: GatewayContext, from = 0): void | Promise<void> {
  for (let i = from; i < steps.length; i++) {
    const pending = steps[i]!(ctx);
    if (pending !== undefined) return pending.then(() => runSteps(steps, ctx, i + 1));
  }
}
