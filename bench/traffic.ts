// Scenarios 1, 2, 3 and 5: bearer and Basic throughput against the floor, latency at a fixed rate,
// bearer throughput under a flood of wrong Basic passwords.
import { call, LIST_PATH, ADDRESS_BURST } from './gateway.js';
import { fmtLatency, load, med, paced, pair, problems, type Bench, type CpuPerRequest, type Row } from './context.js';
import type { PacedOutput } from './paced.js';
import { runJson, settle } from './procs.js';
import { againstFloor, warmUp, type Goal } from './throughput.js';

/** Issue 12: the gateway with cached credentials and no access log, against a bare passthrough. */
const GATEWAY_GOAL: Goal = { ratio: 0.85, cpuRatio: 1.25 };
type Paced = PacedOutput & { cpu: CpuPerRequest };
const ADDED_P99_TARGET_MS = 1;
const FLOOD_RATE = 200;
const FLOOD_TARGET = 0.8;

export async function bearerScenario(b: Bench): Promise<Row> {
  // Warmed again: a process left idle while other scenarios ran has had code dropped (see warmUp).
  await warmUp(b, 'gateway', b.bearer);
  const row = await againstFloor(b, 'bearer', 'Bearer GET /v1/conversations, access log off', 'gateway', b.bearer, GATEWAY_GOAL);
  // The latency scenario paces at half of these.
  b.floorMax = row.floorRps!;
  b.gatewayMax = row.rps!;
  return row;
}

export async function basicScenario(b: Bench): Promise<Row> {
  // b.basic is a user of its own (never used for tokens), so the first request is a real bcrypt.
  const first = await call(b.gateway, 'GET', LIST_PATH, { authorization: b.basic });
  const second = await call(b.gateway, 'GET', LIST_PATH, { authorization: b.basic });
  await warmUp(b, 'gateway', b.basic);
  const row = await againstFloor(b, 'basic', 'Basic GET /v1/conversations (bcrypt cost 10, cached), access log off', 'gateway', b.basic, GATEWAY_GOAL);
  row.notes.unshift(`first Basic request ${first.status} in ${first.ms.toFixed(1)} ms (a bcrypt), the next ${second.status} in ${second.ms.toFixed(1)} ms (new connection each)`);
  return row;
}

/**
 * p99 added by the gateway at a fixed rate of half the floor's maximum. When that rate is close to or
 * beyond the gateway's own maximum (queueing then dominates), a second, informational row measures at
 * half the gateway's maximum, where the per-request cost shows.
 */
export async function latencyScenario(b: Bench): Promise<Row[]> {
  const headers = { authorization: b.bearer };
  b.floorMax ??= (await load(b, 'floor', { path: LIST_PATH, headers })).rps;
  b.gatewayMax ??= (await load(b, 'gateway', { path: LIST_PATH, headers })).rps;
  const rate = Math.max(1, Math.round(b.floorMax / 2));
  const rows = [await latencyAt(b, 'latency', rate, "half the floor's max", true)];
  if (rate > 0.8 * b.gatewayMax) rows.push(await latencyAt(b, 'latency-sustainable', Math.max(1, Math.round(b.gatewayMax / 2)), "half the gateway's max", false));
  return rows;
}

async function latencyAt(b: Bench, id: string, rate: number, label: string, judged: boolean): Promise<Row> {
  const spec = { path: LIST_PATH, headers: { authorization: b.bearer }, rate, duration: b.params.duration, connections: b.params.connections };
  const rounds: { floor: Paced; gateway: Paced; addedP99: number; addedP50: number }[] = [];
  const notes: string[] = [];
  for (let r = 0; r < b.params.rounds; r++) {
    const [floor, gateway] = await pair(r, () => paced(b, 'floor', spec), () => paced(b, 'gateway', spec));
    notes.push(...problems(`round ${r + 1} floor`, floor), ...problems(`round ${r + 1} gateway`, gateway));
    for (const [side, x] of [['floor', floor], ['gateway', gateway]] as const) {
      if (x.rps < rate * 0.97) notes.push(`round ${r + 1} ${side}: achieved ${Math.round(x.rps)}/s of ${rate}/s`);
    }
    rounds.push({ floor, gateway, addedP99: gateway.p99 - floor.p99, addedP50: gateway.p50 - floor.p50 });
    b.log(`  ${id} round ${r + 1} @ ${rate}/s: floor p50 ${floor.p50.toFixed(2)} p99 ${floor.p99.toFixed(2)} | gateway p50 ${gateway.p50.toFixed(2)} p99 ${gateway.p99.toFixed(2)} ms`);
  }
  const added = med(rounds.map((x) => x.addedP99));
  return {
    id,
    scenario: `Bearer GET at a fixed ${rate}/s (${label}), open loop`,
    rps: med(rounds.map((x) => x.gateway.rps), 0),
    p50: med(rounds.map((x) => x.gateway.p50)),
    p99: med(rounds.map((x) => x.gateway.p99)),
    floorRps: med(rounds.map((x) => x.floor.rps), 0),
    ratio: null,
    ratioText: `p99 +${added.toFixed(2)} ms`,
    ...cpuColumns(rounds.map((x) => [x.gateway.cpu.proxyUs, x.floor.cpu.proxyUs])),
    target: judged ? `p99 added ≤ ${ADDED_P99_TARGET_MS} ms` : '(informational)',
    met: judged ? notes.length === 0 && added <= ADDED_P99_TARGET_MS : null,
    notes: [
      `floor p50 ${med(rounds.map((x) => x.floor.p50))} ms, p99 ${med(rounds.map((x) => x.floor.p99))} ms; p50 added ${med(rounds.map((x) => x.addedP50))} ms` +
        (judged ? `; the maxima (closed loop, ${b.params.connections} connections): floor ${Math.round(b.floorMax!)}/s, gateway ${Math.round(b.gatewayMax!)}/s` : ''),
      ...notes,
    ],
    details: { rate, floorMax: b.floorMax, gatewayMax: b.gatewayMax, rounds },
  };
}

/**
 * Bearer throughput with and without wrong Basic passwords arriving at 200/s (open loop) from one
 * client (127.0.0.1, like every load generator here). Each attempt uses a new user name, so only the
 * per-address lockout (the shipped default) stands between the flood and a bcrypt per attempt.
 */
export async function floodScenario(b: Bench): Promise<Row> {
  const headers = { authorization: b.bearer };
  const rounds = [];
  const notes: string[] = [];
  for (let r = 0; r < b.params.rounds; r++) {
    const [quiet, flooded] = await pair(r, () => load(b, 'gateway', { path: LIST_PATH, headers }), async () => {
      let flood: import('node:child_process').ChildProcess | undefined;
      const floodRun = runJson<PacedOutput>('paced', {
        origin: b.gateway, path: LIST_PATH, rate: FLOOD_RATE, duration: b.params.duration + 30, connections: 16, mode: 'basic-wrong',
      }, (c) => (flood = c));
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const bearer = await load(b, 'gateway', { path: LIST_PATH, headers });
      flood!.kill('SIGTERM');
      const attacker = await floodRun;
      b.gatewayRequests += attacker.total;
      await settle(b.gatewayPid); // the flood's last bcrypts, before the next run
      return { bearer, attacker };
    });
    notes.push(...problems(`round ${r + 1} no flood`, quiet), ...problems(`round ${r + 1} flood`, flooded.bearer));
    const attackerRate = flooded.attacker.total / flooded.attacker.durationS;
    rounds.push({ quiet, flooded: flooded.bearer, attacker: flooded.attacker, attackerRate, ratio: flooded.bearer.rps / quiet.rps });
    b.log(`  flood round ${r + 1}: no flood ${fmtLatency(quiet)} | flood ${fmtLatency(flooded.bearer)} | wrong passwords answered ${attackerRate.toFixed(0)}/s (${JSON.stringify(flooded.attacker.statusCodes)}), p50 ${flooded.attacker.p50.toFixed(0)} ms`);
  }
  const ratio = med(rounds.map((x) => x.ratio), 3);
  return {
    id: 'flood',
    scenario: `Bearer GET under ${FLOOD_RATE}/s wrong Basic passwords (vs no flood)`,
    rps: med(rounds.map((x) => x.flooded.rps), 0),
    p50: med(rounds.map((x) => x.flooded.p50)),
    p99: med(rounds.map((x) => x.flooded.p99)),
    floorRps: med(rounds.map((x) => x.quiet.rps), 0),
    ratio,
    // Against the gateway without the flood, like the throughput: what the flood adds per bearer answer.
    ...cpuColumns(rounds.map((x) => [x.flooded.cpu.proxyUs, x.quiet.cpu.proxyUs])),
    target: `≥ ${FLOOD_TARGET.toFixed(2)} × no flood`,
    met: notes.length === 0 && ratio >= FLOOD_TARGET,
    notes: [
      `wrong passwords were answered at ${med(rounds.map((x) => x.attackerRate), 0)}/s of ${FLOOD_RATE}/s sent, p50 ${med(rounds.map((x) => x.attacker.p50), 0)} ms (each a new user name from 127.0.0.1; lockout.addressBurst ${ADDRESS_BURST}, so past that many failures the flood is answered with 429 but for one check per 2 s)`,
      ...notes,
    ],
    details: { floodRate: FLOOD_RATE, rounds },
  };
}


/** The CPU columns of a row from per-round [process under test, reference] µs per request. */
function cpuColumns(pairs: [number, number][]): Pick<Row, 'cpuUs' | 'floorCpuUs' | 'cpuRatio'> {
  return {
    cpuUs: med(pairs.map((p) => p[0]), 0),
    floorCpuUs: med(pairs.map((p) => p[1]), 0),
    cpuRatio: med(pairs.map((p) => p[0] / p[1]), 2),
  };
}
