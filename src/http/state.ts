import type { ParameterizedContext, Middleware } from 'koa';

export interface Principal {
  user: string;
  via: 'basic' | 'bearer';
}

/** What the gateway's middleware put on ctx.state, in the order of the chain. */
export interface GatewayState {
  requestId: string;
  principal?: Principal;
  /** The parsed JSON body of a /v1/tokens request. */
  body?: Record<string, unknown>;
}

export type GatewayContext = ParameterizedContext<GatewayState>;
export type GatewayMiddleware = Middleware<GatewayState>;
