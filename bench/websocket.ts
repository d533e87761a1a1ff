// WebSocket handshakes per second: the gateway (Bearer, the list route: the whole pipeline, the 101
// checked, a tunnel opened and closed) against the same handshake through the floor (bare http-proxy
// `proxy.ws`), rounds alternating, CPU per handshake side by side.
import { fmtLatency, med, measured, pair, resolve, type Bench, type Row, type Target } from './context.js';
import { LIST_PATH } from './gateway.js';
import { runJson } from './procs.js';
import type { LoadResult } from './stats.js';

function handshakes(b: Bench, target: Target, authorization: string, duration: number) {
  return measured(b, target, () => runJson<LoadResult>('handshakes', {
    origin: resolve(b, target).origin, path: LIST_PATH, headers: { Authorization: authorization }, connections: b.params.connections, duration,
  }));
}

function failuresOf(label: string, r: LoadResult): string[] {
  const bad = Object.entries(r.statusCodes).filter(([code]) => code !== '101');
  return [
    ...(bad.length > 0 ? [`${label}: answers other than a good 101: ${bad.map(([c, n]) => `${c}×${n}`).join(', ')}`] : []),
    ...(r.errors > 0 ? [`${label}: ${r.errors} connection errors`] : []),
  ];
}

export async function websocketScenario(b: Bench): Promise<Row> {
  await handshakes(b, 'gateway', b.bearer, Math.min(2, b.params.duration));
  await handshakes(b, 'floor', b.bearer, Math.min(2, b.params.duration));
  const rounds = [];
  const failures: string[] = [];
  for (let r = 0; r < b.params.rounds; r++) {
    const [floor, proxy] = await pair(r, () => handshakes(b, 'floor', b.bearer, b.params.duration), () => handshakes(b, 'gateway', b.bearer, b.params.duration));
    failures.push(...failuresOf(`round ${r + 1} floor`, floor), ...failuresOf(`round ${r + 1} gateway`, proxy));
    const round = { floor, proxy, ratio: proxy.rps / floor.rps, cpuRatio: proxy.cpu.proxyUs / floor.cpu.proxyUs };
    rounds.push(round);
    b.log(`  websocket round ${r + 1}: floor ${fmtLatency(floor)} | gateway ${fmtLatency(proxy)} | ratio ${round.ratio.toFixed(3)}, CPU ratio ${round.cpuRatio.toFixed(2)}`);
  }
  return {
    id: 'websocket',
    scenario: 'WebSocket handshakes/s (Bearer, new connection each, 101 then close)',
    rps: med(rounds.map((x) => x.proxy.rps), 0),
    p50: med(rounds.map((x) => x.proxy.p50)),
    p99: med(rounds.map((x) => x.proxy.p99)),
    floorRps: med(rounds.map((x) => x.floor.rps), 0),
    ratio: med(rounds.map((x) => x.ratio), 3),
    cpuUs: med(rounds.map((x) => x.proxy.cpu.proxyUs), 0),
    floorCpuUs: med(rounds.map((x) => x.floor.cpu.proxyUs), 0),
    cpuRatio: med(rounds.map((x) => x.cpuRatio), 2),
    target: '(reference)',
    met: null,
    notes: [
      `floor: http-proxy \`proxy.ws\` over the same keep-alive agent; floor p50 ${med(rounds.map((x) => x.floor.p50))} ms, p99 ${med(rounds.map((x) => x.floor.p99))} ms; ` +
        `load by a node:net handshake loop (bench/handshakes.ts), ${b.params.connections} connections`,
      ...failures,
    ],
    details: { rounds },
  };
}
