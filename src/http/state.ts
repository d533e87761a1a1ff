import type { ParameterizedContext, Middleware } from 'koa';
import type { ForwardOutcome } from '../proxy/forward.js';
import type { Route } from '../proxy/route-table.js';
import type { ProblemCode } from './problem.js';

export interface Principal {
  user: string;
  via: 'basic' | 'bearer';
}

/** What the gateway's middleware put on ctx.state, in the order of the chain. */
export interface GatewayState {
  requestId: string;
  principal?: Principal;
  /** The route the path matched (set after authentication). */
  route?: Route;
  /** The parsed JSON body of a /v1/tokens request. */
  body?: Record<string, unknown>;
  /** `100 Continue` was sent. */
  continued?: boolean;
  /** The problem code, when the gateway answered with a problem body itself. */
  problem?: ProblemCode;
  /** How a forwarded exchange ended. */
  outcome?: ForwardOutcome;
}

export type GatewayContext = ParameterizedContext<GatewayState>;
export type GatewayMiddleware = Middleware<GatewayState>;
