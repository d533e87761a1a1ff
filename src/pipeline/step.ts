import type { GatewayExchange } from '../http/state.js';

/**
 * One named step of the pipeline: it looks at the request's exchange, throws an HttpProblem to refuse
 * it, or returns. A step with nothing to await returns undefined and costs no promise; one that must
 * wait returns its promise and the next step runs when it settles.
 */
export type Step = (ex: GatewayExchange) => void | Promise<void>;

/**
 * Runs `steps` from `from` in order; synchronous until a step returns a promise. The last step's
 * promise (the hand-off's) is returned as it is.
 */
export function runSteps(steps: readonly Step[], ex: GatewayExchange, from = 0): void | Promise<void> {
  const last = steps.length - 1;
  for (let i = from; i <= last; i++) {
    const pending = steps[i]!(ex);
    if (pending === undefined) continue;
    return i === last ? pending : pending.then(() => runSteps(steps, ex, i + 1));
  }
}
