import { createHash } from 'node:crypto';
import type { RateLimitRule } from '../config/types.js';
import { HttpProblem } from '../http/problem.js';
import type { GatewayContext } from '../http/state.js';
import type { RateBuckets } from '../counters/types.js';

/**
 * Per-principal limit of the matched route (GCRA in the shared store, so every instance on one Redis
 * shares it). Adds RateLimit-Limit/-Remaining/-Reset; past the limit 429 with Retry-After. When the store
 * cannot answer, requests pass (the counter store logs that once per outage): an outage of the counters
 * must not become an outage of the API.
 */
export function rateLimit(store: RateBuckets): (ctx: GatewayContext) => void | Promise<void> {
  // Not async itself: a route without a limit passes without a promise of its own.
  return function limitRate(ctx) {
    const rule = ctx.state.route!.rateLimit;
    return rule ? limited(ctx, rule) : undefined;
  };

  async function limited(ctx: GatewayContext, rule: RateLimitRule): Promise<void> {
    const key = `${ctx.state.route!.path}\0${ctx.state.principal!.user}`;
    let decision;
    try {
      decision = await store.take(createHash('sha256').update(key).digest('base64url'), rule.requests, rule.windowSeconds);
    } catch {
      return;
    }
    const headers = {
      'RateLimit-Limit': String(rule.requests),
      'RateLimit-Remaining': String(decision.remaining),
      'RateLimit-Reset': String(decision.resetSeconds),
    };
    if (!decision.allowed) {
      throw new HttpProblem(429, 'rate_limited', `more than ${rule.requests} requests in ${rule.windowSeconds} s; retry in ${decision.retryAfterSeconds} s`, {
        headers: { ...headers, 'Retry-After': String(decision.retryAfterSeconds) },
      });
    }
    ctx.set(headers);
  }
}
