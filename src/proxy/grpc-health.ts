import { connect, type IncomingHttpHeaders } from 'node:http2';
import { isIP } from 'node:net';
import type { UpstreamConfig } from '../config/types.js';
import type { HealthProbe } from './pool.js';
import { upstreamCa } from './trust.js';

/** The health check path that asks the gRPC health protocol (grpc.health.v1) instead of `GET path`. */
const GRPC_HEALTH_PATH = '/grpc.health.v1.Health/Check';
/** A HealthCheckRequest for the whole server (service ""): an empty message in its 5-byte frame. */
const WHOLE_SERVER = Buffer.from([0, 0, 0, 0, 0]);

/**
 * The health check of an HTTP/2 upstream (`h2c`, `h2`), on a connection of its own per probe (a probe
 * never waits behind requests for a stream, nor takes one from them): `GET path`, healthy on 2xx/3xx;
 * or, for GRPC_HEALTH_PATH, a `Check` call, healthy when it answers OK with `SERVING`.
 * Undefined for an HTTP/1.1 upstream (the pool's own GET over HTTP/1.1).
 */
export function grpcHealthProbe(u: UpstreamConfig): HealthProbe | undefined {
  if ((u.protocol !== 'h2c' && u.protocol !== 'h2') || !u.healthCheck) return undefined;
  const path = u.healthCheck.path;
  const grpc = path === GRPC_HEALTH_PATH;
  const ca = upstreamCa(u.caFile);
  return (target, timeoutMs, settle) => {
    let over = false;
    const host = target.request.hostname;
    const session = connect(target.origin, { ...(ca ? { ca } : {}), ...(isIP(host) ? { servername: '' } : {}) });
    const finish = (healthy: boolean) => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      session.destroy();
      settle(healthy);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    session.on('error', () => finish(false));
    session.once('close', () => finish(false));
    const headers = grpc
      ? { ':method': 'POST', ':path': target.basePath + path, 'content-type': 'application/grpc', te: 'trailers' }
      : { ':method': 'GET', ':path': target.basePath + path };
    const stream = session.request(headers, { endStream: !grpc });
    let status = 0;
    let grpcStatus: string | undefined;
    const body: Buffer[] = [];
    const readStatus = (h: IncomingHttpHeaders) => {
      const s = h['grpc-status'];
      if (typeof s === 'string') grpcStatus = s;
    };
    stream.on('response', (h) => {
      status = Number(h[':status']);
      readStatus(h);
    });
    stream.on('trailers', readStatus);
    stream.on('data', (chunk: Buffer) => body.push(chunk));
    stream.on('error', () => finish(false));
    stream.once('close', () => {
      if (!grpc) return finish(status >= 200 && status < 400);
      finish(status === 200 && grpcStatus === '0' && serving(Buffer.concat(body)));
    });
    if (grpc) stream.end(WHOLE_SERVER);
  };
}

/** A HealthCheckResponse frame whose `status` (field 1, varint) is SERVING (1). */
function serving(frame: Buffer): boolean {
  return frame.length >= 7 && frame[0] === 0 && frame[5] === 0x08 && frame[6] === 0x01;
}
