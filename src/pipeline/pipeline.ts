import type { HandOffs } from './hand-offs.js';
import { runSteps, type Step } from './step.js';

/**
 * The one pipeline every request other than the gateway's own endpoints takes:
 *
 *   authenticate → route → allow → origin → rate limit → paging → upstream headers → hand-off (forward | tunnel | answer)
 *
 * (the request form ran before the own-endpoint lookup, which needs its normalized path). The steps
 * are named functions of the request's exchange, in order, each free to refuse by throwing an
 * HttpProblem; the last one is the hand-off the request form chose. See docs/pipeline-extension.md.
 */
export function pipeline(steps: readonly Step[], handOffs: HandOffs): Step {
  const all: Step[] = [...steps, function handOff(ex) {
    return handOffs[ex.handOff](ex);
  }];
  return function runPipeline(ex) {
    return runSteps(all, ex);
  };
}
