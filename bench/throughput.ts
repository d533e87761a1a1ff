// One process under test against the floor: the same request, closed loop, rounds alternating (ABBA),
// throughput and CPU per request side by side. Every throughput row of the table comes from here.
import { LIST_PATH } from './gateway.js';
import { fmtLatency, load, med, pair, problems, type Bench, type Row, type Target } from './context.js';

/** What a row is judged against (issue 12); null for a reference row that only shows a cost. */
export interface Goal {
  /** Least throughput as a fraction of the floor's. */
  ratio: number;
  /** Most CPU per request as a multiple of the floor's; not judged when absent. */
  cpuRatio?: number;
}

export function goalText(goal: Goal | null): string {
  if (!goal) return '(reference)';
  return `≥ ${goal.ratio.toFixed(2)} × floor` + (goal.cpuRatio === undefined ? '' : `, CPU ≤ ${goal.cpuRatio.toFixed(2)} ×`);
}

/** A short unrecorded run, so the first round does not pay for the JIT, connection pools, the Lua scripts. */
export async function warmUp(b: Bench, target: Target, authorization: string): Promise<void> {
  await load(b, target, { path: LIST_PATH, headers: { authorization }, duration: Math.min(2, b.params.duration) });
}

/** The ratios are medians of per-round ratios, so a slow round hits both sides of its own quotient. */
export async function againstFloor(b: Bench, id: string, scenario: string, target: Target, authorization: string | Record<string, string>, goal: Goal | null): Promise<Row> {
  // A string is an Authorization header; other credentials (a session cookie) come as headers.
  const headers = typeof authorization === 'string' ? { authorization } : authorization;
  const rounds = [];
  const failures: string[] = [];
  for (let r = 0; r < b.params.rounds; r++) {
    const [floor, proxy] = await pair(r, () => load(b, 'floor', { path: LIST_PATH, headers }), () => load(b, target, { path: LIST_PATH, headers }));
    failures.push(...problems(`round ${r + 1} floor`, floor), ...problems(`round ${r + 1} ${id}`, proxy));
    const round = { floor, proxy, ratio: proxy.rps / floor.rps, cpuRatio: proxy.cpu.proxyUs / floor.cpu.proxyUs };
    rounds.push(round);
    b.log(`  ${id} round ${r + 1}: floor ${fmtLatency(floor)} | ${id} ${fmtLatency(proxy)} | ratio ${round.ratio.toFixed(3)}, CPU ratio ${round.cpuRatio.toFixed(2)}`);
  }
  const ratio = med(rounds.map((x) => x.ratio), 3);
  const cpuRatio = med(rounds.map((x) => x.cpuRatio), 2);
  const redisUs = med(rounds.map((x) => x.proxy.cpu.redisUs), 0);
  const cpuUs = med(rounds.map((x) => x.proxy.cpu.proxyUs), 0);
  const met = goal === null ? null
    : failures.length === 0 && ratio >= goal.ratio && (goal.cpuRatio === undefined || cpuRatio <= goal.cpuRatio);
  return {
    id, scenario,
    rps: med(rounds.map((x) => x.proxy.rps), 0),
    p50: med(rounds.map((x) => x.proxy.p50)),
    p99: med(rounds.map((x) => x.proxy.p99)),
    floorRps: med(rounds.map((x) => x.floor.rps), 0),
    ratio,
    cpuUs,
    floorCpuUs: med(rounds.map((x) => x.floor.cpu.proxyUs), 0),
    cpuRatio,
    target: goalText(goal),
    met,
    notes: [
      `floor p50 ${med(rounds.map((x) => x.floor.p50))} ms, p99 ${med(rounds.map((x) => x.floor.p99))} ms; ` +
        `CPU per request besides the proxy: upstream ${med(rounds.map((x) => x.floor.cpu.upstreamUs), 0)} µs` +
        (redisUs > 0 ? `, redis-server ${redisUs} µs` : '') + `; load by ${rounds[0]?.proxy.loader ?? '?'}`,
      // What the gateway's own chain costs: the framework and the proxy are in the Koa passthrough too.
      ...(b.koaCpuUs === undefined ? [] : [`CPU per request over the Koa passthrough's (${b.koaCpuUs} µs, same run): ${cpuUs - b.koaCpuUs >= 0 ? '+' : ''}${cpuUs - b.koaCpuUs} µs`]),
      ...failures,
    ],
    details: { goal, rounds },
  };
}
