import { PROBLEM_CONTENT_TYPE, HttpProblem } from '../http/problem.js';
import type { Sealer } from '../auth/seal.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { toProblem, answerError } from '../http/errors.js';
import type { OwnHandler } from '../http/cors.js';
import type { GatewayExchange } from '../http/state.js';

/**
 * Refusals a proxy relays. nginx's `auth_request` understands only 2xx, 401 and 403 from the service it
 * asks: a 429, 404, 400 or 503 becomes a bare 500 for the client. So a proxy may ask with
 * `X-Gateway-Relay: refusals` (the nginx recipe does): every refusal of that question is then answered
 * **403 with the whole answer sealed in `X-Gateway-Refusal`** (status, headers such as `Retry-After`,
 * `WWW-Authenticate` and `Location`, the problem body). The proxy's `error_page` hands the sealed value
 * back to the same forward-auth path (`X-Gateway-Refusal` on the request), and the gateway writes that
 * answer exactly: the client gets what the gateway would have sent it directly, and the request was
 * judged (and counted by the rate limit and the lockout) once.
 *
 * The value is sealed (AES-256-GCM under a key every instance derives from the token secrets), so only
 * an answer an instance made can be replayed, and only for RELAY_TTL_MS: a forged or stale one gets 400.
 */
export const RELAY_REQUEST_HEADER = 'x-gateway-relay';
export const REFUSAL_HEADER = 'x-gateway-refusal';
const PURPOSE = 'forward-auth refusal';
/** A relayed refusal is replayed at once by the proxy that asked; a minute covers any queue in between. */
const RELAY_TTL_MS = 60_000;

interface SealedAnswer {
  /** status */
  s: number;
  /** headers */
  h: Record<string, string | string[]>;
  /** body */
  b: string;
  /** expires at (ms since the epoch) */
  x: number;
}

/**
 * The answer a client gets for `problem` on a described request, as the gateway would send it directly:
 * a 401 with a `Location` (a browser without a session on a `login` route, see withSignIn) is the
 * redirect to sign in; any other refusal is its problem body.
 */
function directAnswer(problem: HttpProblem, expires: number): SealedAnswer {
  const location = problem.headers.Location;
  if (problem.status === 401 && typeof location === 'string') {
    return { s: 302, h: { Location: location, 'Cache-Control': 'no-store' }, b: '', x: expires };
  }
  return { s: problem.status, h: { ...problem.headers, 'Content-Type': PROBLEM_CONTENT_TYPE }, b: JSON.stringify(problem.toBody()), x: expires };
}

/**
 * `handle` with relayed refusals: a forward-auth question that asked for them (ForwardAuthState.relay)
 * and was refused is answered 403 with the sealed answer; every other request is left to `handle`.
 */
export function relayRefusals(handle: (ex: GatewayExchange) => void | Promise<void>, sealer: Sealer, clock: Clock, log: Logger): (ex: GatewayExchange) => void | Promise<void> {
  const relay = (ex: GatewayExchange, err: unknown): void => {
    const state = ex.forwardAuth;
    const res = ex.res;
    if (!state?.relay || res.headersSent) throw err;
    const problem = toProblem(err);
    if (problem.code === 'internal_error') {
      // Logged as any internal error is; the relayed answer says nothing more than the direct one would.
      answerError(ex, err, log);
      return;
    }
    ex.problem = problem.code;
    state.relayed = problem.status;
    ex.stampId();
    res.setHeader(REFUSAL_HEADER, sealer.seal(PURPOSE, directAnswer(problem, clock.now() + RELAY_TTL_MS)));
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Content-Length', '0');
    if (!ex.req.complete) res.setHeader('Connection', 'close');
    res.statusCode = 403;
    res.end();
  };
  return function handleWithRelay(ex) {
    let pending: void | Promise<void>;
    try {
      pending = handle(ex);
    } catch (err) {
      relay(ex, err);
      return;
    }
    return pending instanceof Promise ? pending.catch((err: unknown) => relay(ex, err)) : pending;
  };
}

/**
 * The forward-auth path asked with `X-Gateway-Refusal`: the sealed answer written as it was made. A value
 * that does not open (forged, changed, made with other token secrets) or has expired gets 400.
 */
export function replayRefusal(sealer: Sealer, clock: Clock): OwnHandler {
  return (ctx) => {
    const sealed = ctx.get(REFUSAL_HEADER);
    const answer = sealer.open(PURPOSE, sealed) as SealedAnswer | undefined;
    if (!isAnswer(answer) || answer.x < clock.now()) {
      throw new HttpProblem(400, 'invalid_request', `the ${REFUSAL_HEADER} value is not an answer of this gateway's, or it is more than ${RELAY_TTL_MS / 1000} s old`);
    }
    ctx.status = answer.s;
    for (const [name, value] of Object.entries(answer.h)) ctx.set(name, value);
    ctx.body = answer.b;
  };
}

function isAnswer(value: unknown): value is SealedAnswer {
  const a = value as Partial<SealedAnswer> | undefined;
  return typeof a === 'object' && a !== null && typeof a.s === 'number' && a.s >= 300 && a.s <= 599
    && typeof a.h === 'object' && a.h !== null && typeof a.b === 'string' && typeof a.x === 'number';
}
