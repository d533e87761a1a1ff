import type { GatewayContext } from '../http/state.js';
import type { HandOffs } from './hand-offs.js';
import { runSteps, type Step } from './step.js';

/**
 * The one pipeline every request other than the gateway's own endpoints takes:
 *
 *   authenticate → route → origin → rate limit → paging → upstream headers → hand-off (forward | tunnel)
 *
 * (the request form ran before the own-endpoint lookup, which needs its normalized path). The steps
 * are named functions, in order, each free to refuse by throwing an HttpProblem; the last one is the
 * hand-off the request form chose. See docs/pipeline-extension.md for adding a step or a hand-off.
 */
export function pipeline(steps: readonly Step[], handOffs: HandOffs): Step {
  const all: Step[] = [...steps, function handOff(ctx: GatewayContext) {
    return handOffs[ctx.state.handOff](ctx);
  }];
  return function runPipeline(ctx) {
    return runSteps(all, ctx);
  };
}
