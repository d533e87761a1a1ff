// Scenario 4: POST /v1/tokens/refresh per second, and POST /v1/tokens/create per second against the
// raw bcrypt verify rate measured in the same run, at the same concurrency, alternating rounds.
import { CREATE_USER_PREFIX, createTokens, USER } from './gateway.js';
import { fmtLatency, load, med, pair, problems, type Bench, type CpuPerRequest, type Row } from './context.js';
import { runJson, settle } from './procs.js';
import { REVOCATION_WAIT_MS } from '../src/stores/redis/store-options.js';

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
  const revoke = await revokeLatency(b);
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
      id: 'revoke', scenario: 'POST /v1/tokens/revoke (synchronous: answers once no instance can accept the session)',
      rps: revoke.rps, p50: revoke.p50, p99: revoke.p99, floorRps: null, ratio: null, cpuUs: null, floorCpuUs: null, cpuRatio: null, target: '(informational)', met: null,
      notes: [`${revoke.count} revokes, ${REVOKE_CONCURRENCY} at a time; the wait is the store's REVOCATION_WAIT_MS (${REVOCATION_WAIT_MS} ms), paid by revocations only`],
      details: { revoke },
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

const REVOKES = 200;
const REVOKE_CONCURRENCY = 8;

/** Latency of revokes (access token), each of its own fresh session. */
async function revokeLatency(b: Bench): Promise<{ count: number; rps: number; p50: number; p99: number }> {
  const sessions: Array<{ accessToken: string }> = [];
  for (let i = 0; i < REVOKES; i++) sessions.push(await createTokens(b.gateway, USER, b.password));
  const ms: number[] = [];
  const started = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: REVOKE_CONCURRENCY }, async () => {
    while (next < sessions.length) {
      const s = sessions[next++]!;
      const t = performance.now();
      const res = await fetch(`${b.gateway}/v1/tokens/revoke`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ token: s.accessToken, type: 'ACCESS_TOKEN' }) });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`POST /v1/tokens/revoke answered ${res.status}`);
      ms.push(performance.now() - t);
    }
  }));
  const elapsedS = (performance.now() - started) / 1000;
  ms.sort((x, y) => x - y);
  const at = (q: number) => Number(ms[Math.min(ms.length - 1, Math.floor(q * ms.length))]!.toFixed(2));
  b.log(`  revoke: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`);
  return { count: ms.length, rps: Math.round(ms.length / elapsedS), p50: at(0.5), p99: at(0.99) };
}
