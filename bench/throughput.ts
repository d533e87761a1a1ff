// One process under test against the floor: the same request, closed loop, rounds alternating (ABBA),
// throughput and CPU per request side by side. Every throughput row of the table comes from here.
import { LIST_PATH } from './gateway.js';
import { fmtLatency, load, med, pair, problems, type Bench, type Row, type Target } from './context.js';

/** What a row is judged against (issue 12); null for a reference row that only shows a cost. */
export interface Goal {
  /** Least throughput as a fraction of the floor's; not judged when absent (a row judged by its CPU alone). */
  ratio?: number;
  /** Most CPU per request as a multiple of the floor's; not judged when absent. */
  cpuRatio?: number;
}

export function goalText(goal: Goal | null): string {
  if (!goal) return '(reference)';
  const parts = [...(goal.ratio === undefined ? [] : [`≥ ${goal.ratio.toFixed(2)} × floor`]), ...(goal.cpuRatio === undefined ? [] : [`CPU ≤ ${goal.cpuRatio.toFixed(2)} ×`])];
  return parts.join(', ');
}

/** Whether a row's medians meet its goal. */
export function meets(goal: Goal, ratio: number, cpuRatio: number): boolean {
  return (goal.ratio === undefined || ratio >= goal.ratio) && (goal.cpuRatio === undefined || cpuRatio <= goal.cpuRatio);
}

/** One window of the warm-up (s), the fewest of them per request, and the most in all. */
const WARM_WINDOW_S = 2;
const WARM_MIN_WINDOWS = 3;
const WARM_MAX_WINDOWS = 12;
/** Settled: the CPU per request of a request's last two windows within this fraction of each other. */
const WARM_SETTLED = 0.1;

/**
 * Unrecorded runs before the rounds, so no round pays for the JIT, connection pools or the Lua scripts:
 * windows of each request in turn (the credentials the rounds will send), until each request's CPU per
 * request in its last two windows agree within 10 % (at least three windows each, at most twelve in all).
 * V8 keeps optimizing a process for as long as new code paths get hot: the gateway runs far more code than
 * the floor and took 10 to 15 s of load to stop (`--trace-opt`); a 2 s warm-up left the first rounds
 * measuring a half-optimized gateway. A process left idle for a while (another scenario's rounds) cools
 * again: V8 drops the bytecode, and with it the optimized code, of functions not run for some collections
 * (40 s idle: 41 functions optimized again once the load returned, 15 with `--no-flush-bytecode`), so each
 * scenario of the gateway warms it up again.
 */
export async function warmUp(b: Bench, target: Target, ...authorizations: string[]): Promise<void> {
  const windows: number[][] = authorizations.map(() => []);
  const settled = (w: number[]) => {
    if (w.length < WARM_MIN_WINDOWS) return false;
    const [x, y] = [w[w.length - 2]!, w[w.length - 1]!];
    return Math.abs(x - y) <= WARM_SETTLED * Math.max(x, y);
  };
  let n = 0;
  while (n < WARM_MAX_WINDOWS && !windows.every(settled)) {
    const i = n++ % authorizations.length;
    if (settled(windows[i]!)) continue;
    const out = await load(b, target, { path: LIST_PATH, headers: { authorization: authorizations[i]! }, duration: Math.min(WARM_WINDOW_S, b.params.duration) });
    windows[i]!.push(out.cpu.proxyUs);
  }
  const name = typeof target === 'string' ? target : target.name;
  b.log(`  warm-up of the ${name}: CPU µs/req per ${WARM_WINDOW_S} s window ${windows.map((w) => w.join(' → ')).join('; ')}${windows.every(settled) ? '' : ' (not settled)'}`);
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
    : failures.length === 0 && meets(goal, ratio, cpuRatio);
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
