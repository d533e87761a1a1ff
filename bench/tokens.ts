// Scenario 4: POST /v1/tokens/refresh per second, and POST /v1/tokens/create per second against the
// raw bcrypt verify rate measured in the same run, at the same concurrency, alternating rounds.
import { CREATE_USER_PREFIX, createTokens, USER } from './gateway.js';
import { fmtLatency, load, med, pair, problems, type Bench, type CpuPerRequest, type Row } from './context.js';
import { runJson, settle } from './procs.js';

const REFRESH_TARGET = 3000;
const CREATE_TARGET = 0.8;
const JSON_HEADERS = { 'content-type': 'application/json' };

interface RawBcrypt {
  verifies: number;
  durationS: number;
  rate: number;
  threadPool: number;
}

export async function tokensScenario(b: Bench): Promise<Row[]> {
  const refresh = [];
  const create = [];
  const cached = [];
  const notes = { refresh: [] as string[], create: [] as string[], cached: [] as string[] };
  for (let r = 0; r < b.params.rounds; r++) {
    // Refresh: every connection rotates its own session's refresh token, answer after answer.
    const sessions = await Promise.all(Array.from({ length: b.params.connections }, () => createTokens(b.gateway, USER, b.password)));
    const rot = await load(b, 'gateway', { path: '/v1/tokens/refresh', method: 'POST', mode: 'refresh', refreshTokens: sessions.map((s) => s.refreshToken) });
    notes.refresh.push(...problems(`round ${r + 1}`, rot));
    if (rot.brokenChains) notes.refresh.push(`round ${r + 1}: ${rot.brokenChains} rotation chains broke`);
    refresh.push(rot);
    b.log(`  refresh round ${r + 1}: ${fmtLatency(rot)}`);

    // Create with a new user name each time (every one a bcrypt) vs bcrypt verify alone.
    const left = b.createUsers - b.nextCreateUser;
    const [cold, raw] = await pair(r, async () => {
      const x = await load(b, 'gateway', {
        path: '/v1/tokens/create', method: 'POST', mode: 'create', userPrefix: CREATE_USER_PREFIX, userStart: b.nextCreateUser, password: b.password,
      });
      b.nextCreateUser += (x.usersUsed ?? 0) + 1;
      return x;
    }, () => runJson<RawBcrypt>('bcrypt-rate', { concurrency: b.params.connections, duration: b.params.duration, cost: 10 }));
    notes.create.push(...problems(`round ${r + 1}`, cold));
    if ((cold.usersUsed ?? 0) >= left) notes.create.push(`round ${r + 1}: ran out of distinct users (${left})`);
    create.push({ gateway: cold, raw, ratio: cold.rps / raw.rate });
    b.log(`  create round ${r + 1}: gateway ${fmtLatency(cold)} | raw bcrypt verify ${raw.rate.toFixed(0)}/s | ratio ${(cold.rps / raw.rate).toFixed(3)}`);

    // The bcrypts queued when the create load stopped finish first, or they would count against the next runs.
    if (!(await settle(b.gatewayPid))) notes.cached.push(`round ${r + 1}: the gateway was still busy 10 s after the create run`);

    // Create again and again with the same credentials: the verified-credential cache answers.
    const same = await load(b, 'gateway', {
      path: '/v1/tokens/create', method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ appKey: USER, appSecret: b.password }),
      autocannon: true, // like the other token rows, so the three compare with each other
    });
    notes.cached.push(...problems(`round ${r + 1}`, same));
    cached.push(same);
    b.log(`  create (same credentials) round ${r + 1}: ${fmtLatency(same)}`);
  }
  const refreshRps = med(refresh.map((x) => x.rps), 0);
  const createRatio = med(create.map((x) => x.ratio), 3);
  const threadPool = create[0]?.raw.threadPool ?? 4;
  return [
    {
      id: 'refresh', scenario: 'POST /v1/tokens/refresh (rotation chains, one per connection)',
      rps: refreshRps, p50: med(refresh.map((x) => x.p50)), p99: med(refresh.map((x) => x.p99)),
      floorRps: null, ratio: null, ...cpuOnly(refresh), target: `≥ ${REFRESH_TARGET}/s`,
      met: notes.refresh.length === 0 && refreshRps >= REFRESH_TARGET,
      notes: [`CPU per refresh: gateway ${med(refresh.map((x) => x.cpu.proxyUs), 0)} µs + redis-server ${med(refresh.map((x) => x.cpu.redisUs), 0)} µs`, ...notes.refresh],
      details: { rounds: refresh },
    },
    {
      id: 'create', scenario: 'POST /v1/tokens/create, new user each time (vs raw bcrypt verify)',
      rps: med(create.map((x) => x.gateway.rps), 0), p50: med(create.map((x) => x.gateway.p50)), p99: med(create.map((x) => x.gateway.p99)),
      floorRps: med(create.map((x) => x.raw.rate), 0), ratio: createRatio, ...cpuOnly(create.map((x) => x.gateway)), target: `≥ ${CREATE_TARGET.toFixed(2)} × raw bcrypt`,
      met: notes.create.length === 0 && createRatio >= CREATE_TARGET,
      notes: [`raw rate: bcrypt verify of a cost-10 hash, ${b.params.connections} in flight, thread pool ${threadPool}, separate process`, ...notes.create],
      details: { rounds: create },
    },
    {
      id: 'create-cached', scenario: 'POST /v1/tokens/create, same credentials (cache hit)',
      rps: med(cached.map((x) => x.rps), 0), p50: med(cached.map((x) => x.p50)), p99: med(cached.map((x) => x.p99)),
      floorRps: null, ratio: null, ...cpuOnly(cached), target: '(informational)', met: null, notes: notes.cached, details: { rounds: cached },
    },
  ];
}

/** The gateway's CPU per answer; there is no floor to hold it against. */
function cpuOnly(runs: { cpu: CpuPerRequest }[]): Pick<Row, 'cpuUs' | 'floorCpuUs' | 'cpuRatio'> {
  return { cpuUs: med(runs.map((x) => x.cpu.proxyUs), 0), floorCpuUs: null, cpuRatio: null };
}
