import type { ParameterizedContext, Middleware } from 'koa';
import type { Exchange } from '../core/exchange.js';
import type { Route } from '../routes/route-table.js';

export type { HandOffName } from '../core/exchange.js';

/** A request's record (see Exchange), with the route table's routes. */
export type GatewayExchange = Exchange<Route>;

/** The gateway's own endpoints run on Koa; their ctx.state is the request's exchange. */
export type GatewayState = GatewayExchange;
export type GatewayContext = ParameterizedContext<GatewayState>;
export type GatewayMiddleware = Middleware<GatewayState>;
