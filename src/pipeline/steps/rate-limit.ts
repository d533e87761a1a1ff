import type { RateLimitRule } from '../../config/types.js';
import { sha256 } from '../../core/digest.js';
import { HttpProblem } from '../../http/problem.js';
import type { GatewayExchange } from '../../http/state.js';
import type { RateBuckets } from '../../stores/counters/counter-store.js';

/**
 * Per-principal limit of the matched route (GCRA in the shared store, so every instance on one Redis
 * shares it). Adds RateLimit-Limit/-Remaining/-Reset; past the limit 429 with Retry-After. When the store
 * cannot answer, requests pass (the counter store logs that once per outage): an outage of the counters
 * must not become an outage of the API.
 */
export function rateLimit(store: RateBuckets): (ex: GatewayExchange) => void | Promise<void> {
  // Not async itself: a route without a limit passes without a promise of its own.
  return function limitRate(ex) {
    const rule = ex.route!.rateLimit;
    // A credential's own limit (an API key's), beside the route's: its bucket is the credential's.
    const own = ex.principal!.credential?.rate;
    if (own) return limited(ex, own, `\0credential\0${ex.principal!.credential!.id}`, rule ? () => limited(ex, rule, `${ex.route!.path}\0${ex.principal!.user}`) : undefined);
    return rule ? limited(ex, rule, `${ex.route!.path}\0${ex.principal!.user}`) : undefined;
  };

  async function limited(ex: GatewayExchange, rule: RateLimitRule, key: string, then?: () => Promise<void>): Promise<void> {
    let decision;
    try {
      decision = await store.take(sha256(key), rule.requests, rule.windowSeconds);
    } catch {
      return then?.();
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
    for (const name in headers) ex.res.setHeader(name, headers[name as keyof typeof headers]);
    // The route's limit after the credential's: its RateLimit-* headers are the ones the client sees.
    return then?.();
  }
}
