import type { Logger } from '../log.js';
import type { GatewayContext } from './state.js';

const PROBES = new Set(['/healthz', '/readyz']);

/**
 * One line per request, written after the response (proxied ones included) has gone out. It never
 * carries a secret: no query string (its values can be tokens, e-mail addresses or anything else the
 * gateway cannot tell apart), no userinfo and no raw request target that is not a plain path, no
 * header values. The user name is logged; the password and tokens never are. Health probes log at debug.
 * Call `begin` as the request arrives and the returned function once the chain is done.
 */
export function accessLine(log: Logger): (ctx: GatewayContext, started: number) => () => void {
  return (ctx, started) => {
    const socket = ctx.req.socket;
    const bytesBefore = socket.bytesWritten;
    const write = () => {
      const outcome = ctx.state.outcome;
      const line = {
        requestId: ctx.state.requestId,
        address: ctx.ip,
        method: ctx.method,
        // A forward-auth call: the path it described as written (the judged one is the same, or refused).
        path: ctx.state.forwardAuth?.described?.slice(0, 2048) ?? loggablePath(ctx),
        status: ctx.respond === false ? ctx.res.statusCode : ctx.status,
        code: ctx.state.problem ?? outcome?.code,
        cut: outcome?.cut,
        // The authenticated user; else the user name a refused Basic request or a token call named.
        user: ctx.state.principal?.user ?? ctx.state.triedUser,
        via: ctx.state.principal?.via,
        route: ctx.state.route?.path,
        upstream: ctx.state.route?.upstream,
        // A forward-auth call: method and path above are the request it asked about.
        forwardAuth: ctx.state.forwardAuth ? true : undefined,
        forwardedHost: ctx.state.forwardAuth?.host,
        bytes: socket.bytesWritten - bytesBefore,
        ms: performance.now() - started,
      };
      if (PROBES.has(line.path)) log.debug('request', line);
      else log.info('request', line);
    };
    return () => {
      // A proxied response is over by now; one the gateway answers itself is written after the chain returns.
      if (ctx.respond === false || ctx.res.writableFinished || ctx.res.destroyed) write();
      else ctx.res.once('close', write);
    };
  };
}

/** The normalized path of an origin-form target; anything else only says what it was. */
function loggablePath(ctx: GatewayContext): string {
  return ctx.req.url?.startsWith('/') ? ctx.path.slice(0, 2048) : '(not a path: refused)';
}
