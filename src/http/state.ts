import type { ParameterizedContext, Middleware } from 'koa';
import type { Principal } from '../auth/principal.js';
import type { Route } from '../proxy/route-table.js';
import type { ProblemCode } from './problem.js';

/**
 * How a request that went through the pipeline is finished: forwarded to the upstream, (a WebSocket
 * handshake) tunnelled to it, or (a forward-auth call) answered with who it is. The request form picks it; a path the own-endpoint lookup knows may pick
 * another. Adding one: a name here and a function in src/pipeline/hand-offs.ts (docs/pipeline-extension.md).
 */
export type HandOffName = 'forward' | 'tunnel' | 'answer';

/** How a forwarded exchange ended, for the access log and metrics. */
export interface ForwardOutcome {
  /** The problem code when the gateway answered in the upstream's place. */
  code?: ProblemCode;
  /** Why the response was cut after it began (it was logged as started, never as complete). */
  cut?: 'client_closed' | 'upstream_closed' | 'response_idle';
}

/** What the gateway's steps put on ctx.state, in the order of the pipeline. */
export interface GatewayState {
  requestId: string;
  /** Set by the request form: how the pipeline ends for this request. */
  handOff: HandOffName;
  /** The request form saw more than one Authorization header (authentication refuses it). */
  repeatedAuthorization?: boolean;
  /** The user name a request tried (Basic, token create) before it was verified: for the access line. */
  triedUser?: string;
  principal?: Principal;
  /**
   * A forward-auth call: the path it was sent to (ctx.method/path are the request it describes), and
   * the described path as written (set once method and URI are well-formed; the access line shows it).
   */
  forwardAuth?: { path: string; host: string | undefined; proto: 'http' | 'https' | undefined; described?: string };
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
