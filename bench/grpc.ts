// The HTTP/2-upstream rows: a unary gRPC call (h2load over h2c, POST of one message frame) through the
// gateway (server.h2c, an h2c upstream) against a bare node:http2 pass-through (h2c-floor.ts); and
// HTTP/1.1 clients (wrk) through the gateway to an h2c upstream, against the plain floor (http-proxy to
// the HTTP/1.1 upstream). Both upstreams answer the same bytes (bench/grpc-upstream.ts, upstream.ts).
// A third row (reference) runs the unary call against the same pass-through with the gateway's
// replacement of Node 20's AsyncResource.bind (h2c-floor.ts --bind-backport): the like-for-like ratio.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Bench, Proc, Row } from './context.js';
import { againstTlsFloor, skipped, startVariant } from './edge.js';
import { h2loadVersion, runH2load } from './h2load.js';
import { startService, stopChild } from './procs.js';
import { againstFloor, warmUp, type Goal } from './throughput.js';

const STREAMS = 8;
/** The unary row's line: CPU per call within 1.5 × the bare pass-through's (throughput not judged). */
const GRPC_GOAL: Goal = { cpuRatio: 1.5 };
/** The request of the unary row: one frame of test.Msg { text: "hi" }. */
const UNARY = Buffer.from([0, 0, 0, 0, 4, 0x0a, 0x02, 0x68, 0x69]);

export async function grpcScenarios(b: Bench): Promise<Row[]> {
  const connections = Math.max(1, Math.round(b.params.connections / STREAMS));
  const unaryScenario = `Bearer unary gRPC call over h2c (server.h2c) to an h2c upstream, ${connections} connections × ${STREAMS} streams (vs a bare node:http2 pass-through)`;
  const h1Scenario = 'Bearer GET /v1/conversations, HTTP/1.1 clients to an h2c upstream (vs the plain floor to the HTTP/1.1 upstream)';
  const upstream = await startService('grpc-upstream');
  const floor = await startService('h2c-floor', [`http://127.0.0.1:${upstream.port}`]);
  const backported = await startService('h2c-floor', [`http://127.0.0.1:${upstream.port}`, '--bind-backport']);
  let gateway: Awaited<ReturnType<typeof startVariant>> | undefined;
  try {
    gateway = await startVariant(b, { name: 'grpc', h2cUpstreamPort: upstream.port });
    const rows: Row[] = [];
    const version = await h2loadVersion();
    if (!version) {
      rows.push(skipped('grpc-unary', unaryScenario, 'h2load is not on PATH (apt-get install nghttp2-client)'));
    } else {
      const dataFile = join(b.gatewaySetup.dir, 'unary.bin');
      writeFileSync(dataFile, UNARY);
      const headers = { authorization: gateway.bearer, 'content-type': 'application/grpc', te: 'trailers' };
      const floorProc: Proc = { name: 'h2c floor', origin: `http://127.0.0.1:${floor.port}`, pid: floor.child.pid! };
      const drive = (p: Proc, duration: number) => runH2load({ url: `${p.origin}/bench.Echo/Unary`, connections, streams: STREAMS, duration, headers, dataFile });
      rows.push(await againstTlsFloor(b, 'grpc-unary', unaryScenario, floorProc, gateway.proc, drive,
        `${version} -t1 -c${connections} -m${STREAMS} -D${b.params.duration} -d (no percentiles: p50/p99 not measured)`,
        'a bare node:http2 pass-through (h2c-floor.ts: one h2c session to the same upstream, headers, body and trailers on)', GRPC_GOAL));
      // The gateway replaces Node 20's AsyncResource.bind, which Node's HTTP/2 client calls per request
      // (src/core/async-bind.ts); the bare floor above pays it. This reference gives the floor the same.
      const backportedProc: Proc = { name: 'h2c floor + bind backport', origin: `http://127.0.0.1:${backported.port}`, pid: backported.child.pid! };
      rows.push(await againstTlsFloor(b, 'grpc-unary-like-for-like', unaryScenario.replace('vs a bare node:http2 pass-through', 'vs the same pass-through with the gateway\'s AsyncResource.bind'), backportedProc, gateway.proc, drive,
        `${version} -t1 -c${connections} -m${STREAMS} -D${b.params.duration} -d (no percentiles: p50/p99 not measured)`,
        'h2c-floor.ts --bind-backport: the bare pass-through with src/core/async-bind.ts installed, as the gateway has it', null));
    }
    await warmUp(b, gateway.proc, gateway.bearer);
    rows.push(await againstFloor(b, 'h2c-upstream', h1Scenario, gateway.proc, gateway.bearer, null));
    return rows;
  } finally {
    await gateway?.stop();
    await stopChild(floor.child);
    await stopChild(backported.child);
    await stopChild(upstream.child);
  }
}
