import type { Exchange } from '../core/exchange.js';
import { logPlain, type Logger } from '../log.js';
import { streamBodyBytes } from './http2.js';
import { recordedGrpcStatus } from '../core/grpc.js';

const PROBES = new Set(['/healthz', '/readyz']);

/**
 * One line per request, written after the response (proxied ones included) has gone out. It never
 * carries a secret: no query string (its values can be tokens, e-mail addresses or anything else the
 * gateway cannot tell apart), no userinfo and no raw request target that is not a plain path, no
 * header values. The user name is logged; the password and tokens never are. Health probes log at debug.
 * Call it once the request's handling is done: it writes at once when the answer is out, else at its end.
 */
export function accessLine(log: Logger): (ex: Exchange) => void {
  return (ex) => {
    const res = ex.res;
    const write = () => {
      const line = {
        requestId: ex.requestId,
        address: ex.address,
        method: ex.method,
        // A forward-auth call: the path it described as written (the judged one is the same, or refused).
        path: ex.forwardAuth?.described?.slice(0, 2048) ?? loggablePath(ex),
        // A forward-auth refusal relayed sealed (a 403 to the proxy): the status the client is given.
        status: ex.forwardAuth?.relayed ?? res.statusCode,
        relayed: ex.forwardAuth?.relayed !== undefined ? true : undefined,
        code: ex.problem,
        // A gRPC call: the status it ended with, where the gateway saw it (its own refusals, the upstream's trailers).
        grpcStatus: recordedGrpcStatus(res),
        cut: ex.cut,
        // The authenticated user; else the user name a refused Basic request or a token call named.
        user: ex.principal?.user ?? ex.triedUser,
        via: ex.principal?.via,
        // The x5t#S256 of the connection's verified client certificate, whichever credential decided.
        certificate: ex.certificate,
        // A credential with a name of its own (an API key): its id and name, never its secret.
        keyId: ex.principal?.credential?.id,
        keyName: ex.principal?.credential?.name,
        route: ex.route?.path,
        upstream: ex.route?.upstream,
        // A forward-auth call: method and path above are the request it asked about.
        forwardAuth: ex.forwardAuth ? true : undefined,
        forwardedHost: ex.forwardAuth?.host,
        // HTTP/1: what the connection carried for the answer, head included; HTTP/2: the stream's body.
        bytes: ex.req.httpVersionMajor >= 2 ? streamBodyBytes(res) : ex.bytesBefore < 0 ? undefined : ex.req.socket.bytesWritten - ex.bytesBefore,
        ms: performance.now() - ex.started,
        protocol: ex.req.httpVersionMajor >= 2 ? 'h2' : 'h1',
        // The request's trace, with tracing on: the SERVER span's ids.
        trace_id: ex.trace?.traceId,
        span_id: ex.trace?.spanId,
      };
      logPlain(log, PROBES.has(line.path) ? 'debug' : 'info', 'request', line);
    };
    // A proxied, tunnelled or refused request's answer is out by now; an own endpoint's may still be writing.
    if (!ex.own || res.writableFinished || res.destroyed) write();
    else res.once('close', write);
  };
}

/** The normalized path of an origin-form target; anything else only says what it was. */
function loggablePath(ex: Exchange): string {
  return ex.req.url?.startsWith('/') ? ex.path.slice(0, 2048) : '(not a path: refused)';
}
