// Issue 43: what OpenTelemetry tracing costs. Three gateway processes of the same configuration, each
// measured against the floor in this run: tracing off (no endpoint: the SDK is not loaded), on with
// sampleRatio 0 (every request still gets a non-recording span and passes trace context on) and on
// with sampleRatio 1 (every request recorded and exported: a SERVER and a CLIENT span). The collector is
// an OTLP/HTTP sink in this process that reads each export and answers 200.
import { createServer, type Server } from 'node:http';
import type { Bench, Proc, Row } from './context.js';
import { call, createTokens, LIST_PATH, startGateway, USER, writeVariantFiles, type GatewayVariant } from './gateway.js';
import { rssMb, stopChild } from './procs.js';
import { againstFloor, warmUp, type Goal } from './throughput.js';

/** Off must cost nothing: the Bearer row's goal. On at ratio 0, little; at ratio 1, what recording costs. */
const OFF_GOAL: Goal = { ratio: 0.85, cpuRatio: 1.25 };
const RATIO_0_GOAL: Goal = { ratio: 0.8 };

interface Sink {
  url: string;
  exports: number;
  bytes: number;
  server: Server;
}

async function startSink(): Promise<Sink> {
  const sink: Sink = { url: '', exports: 0, bytes: 0, server: createServer((req, res) => {
    req.on('data', (c: Buffer) => (sink.bytes += c.length));
    req.on('end', () => {
      sink.exports++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  }) };
  await new Promise<void>((resolve) => sink.server.listen(0, '127.0.0.1', resolve));
  sink.url = `http://127.0.0.1:${(sink.server.address() as { port: number }).port}`;
  return sink;
}

export async function tracingScenarios(b: Bench): Promise<Row[]> {
  const sink = await startSink();
  try {
    const rows: Row[] = [];
    const variants: Array<[string, string, GatewayVariant, Goal | null]> = [
      ['tracing-off', 'Bearer GET /v1/conversations, tracing off (no endpoint: no SDK loaded)', { name: 'tracing-off' }, OFF_GOAL],
      ['tracing-ratio0', 'Bearer GET /v1/conversations, tracing on, sampleRatio 0 (spans not recorded, traceparent passed on)', { name: 'tracing-ratio0', tracing: { endpoint: sink.url, sampleRatio: 0 } }, RATIO_0_GOAL],
      ['tracing-ratio1', 'Bearer GET /v1/conversations, tracing on, sampleRatio 1 (every request: SERVER + CLIENT span exported)', { name: 'tracing-ratio1', tracing: { endpoint: sink.url, sampleRatio: 1 } }, null],
    ];
    for (const [id, scenario, variant, goal] of variants) {
      const before = { exports: sink.exports, bytes: sink.bytes };
      const setup = writeVariantFiles(b.gatewaySetup, variant);
      const gw = await startGateway(setup, b.redisUrl);
      try {
        const { accessToken } = await createTokens(gw.origin, USER, b.password);
        const bearer = `Bearer ${accessToken}`;
        const check = await call(gw.origin, 'GET', LIST_PATH, { authorization: bearer });
        if (check.status !== 200) throw new Error(`${id}: the gateway answered ${check.status}; see ${setup.logFile}`);
        const proc: Proc = { name: id, origin: gw.origin, pid: gw.child.pid! };
        await warmUp(b, proc, bearer);
        const row = await againstFloor(b, id, scenario, proc, bearer, goal);
        row.notes.push(`OTLP exports received: ${sink.exports - before.exports} (${Math.round((sink.bytes - before.bytes) / 1024)} KiB, warm-up included); RSS after its rounds: ${(await rssMb(proc.pid)).toFixed(1)} MB`);
        rows.push(row);
      } finally {
        await stopChild(gw.child, 10_000);
      }
    }
    return rows;
  } finally {
    sink.server.closeAllConnections();
    sink.server.close();
  }
}
