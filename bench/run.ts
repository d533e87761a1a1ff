// npm run bench [-- --duration S --connections N --rounds N --scenarios a,b --soak-requests N --profile --loader wrk|autocannon]
// Starts a cheap upstream, the floor (bare http-proxy) and the gateway on the redis store against a
// redis-server of its own (and, for their scenarios, a Koa passthrough and gateway variants), drives
// them with wrk (autocannon where a run needs per-connection state or a request count, or when wrk
// cannot be had), writes bench/results.json and prints a markdown table. Everything listens on and is
// sent to 127.0.0.1 only.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { SCENARIOS, type Bench, type Params, type Row, type ScenarioId } from './context.js';
import { BASIC_USER, basicHeader, createTokens, ADDRESS_BURST, startGateway, USER, writeGatewayFiles } from './gateway.js';
import { killAllNow, rssMb, settle, startRedis, startService, stopAll, stopChild } from './procs.js';
import { newestProfile, profileTable, summarizeProfile } from './profile.js';
import { machine, markdownTable, provenance, writeResults, type Results } from './report.js';
import { round } from './stats.js';
import { soakScenario } from './soak.js';
import { tokensScenario } from './tokens.js';
import { warmUp } from './throughput.js';
import { basicScenario, bearerScenario, floodScenario, latencyScenario } from './traffic.js';
import { accessLogScenario, frameworkScenario, rateLimitScenario, apiKeyScenario, bearerAllSourcesScenario } from './variants.js';
import { tracingScenarios } from './tracing.js';
import { authzScenarios } from './authz.js';
import { websocketScenario } from './websocket.js';
import { h2Scenario, ldapBasicScenario, tlsScenario } from './edge.js';
import { grpcScenarios } from './grpc.js';
import { openidScenarios } from './openid.js';
import { ensureWrk } from './wrk.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
let tempDir: string | undefined;
const USAGE = `usage: npm run bench -- [--duration SECONDS] [--connections N] [--rounds N]
       [--scenarios ${SCENARIOS.join(',')}] [--soak-requests N] [--profile]
       [--loader wrk|autocannon]`;

function parseParams(argv: string[]): Params {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '4' },
      connections: { type: 'string', default: '32' },
      rounds: { type: 'string', default: '5' },
      scenarios: { type: 'string', default: SCENARIOS.join(',') },
      'soak-requests': { type: 'string', default: '400000' },
      profile: { type: 'boolean', default: false },
      loader: { type: 'string', default: 'wrk' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  const int = (name: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min} (got ${v})\n${USAGE}`);
    return n;
  };
  const scenarios = values.scenarios.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = scenarios.filter((s) => !(SCENARIOS as readonly string[]).includes(s));
  if (values.loader !== 'wrk' && values.loader !== 'autocannon') throw new Error(`--loader must be wrk or autocannon (got ${values.loader})\n${USAGE}`);
  if (unknown.length > 0 || scenarios.length === 0) throw new Error(`--scenarios: unknown ${unknown.join(', ') || '(none given)'}; known: ${SCENARIOS.join(',')}`);
  return {
    duration: int('duration', values.duration, 1),
    connections: int('connections', values.connections, 1),
    rounds: int('rounds', values.rounds, 1),
    scenarios: SCENARIOS.filter((s) => scenarios.includes(s)),
    soakRequests: int('soak-requests', values['soak-requests'], 1000),
    profile: values.profile,
    loader: values.loader,
  };
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const params = parseParams(argv);
  const started = Date.now();
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'));
  tempDir = dir;
  const profileDir = join(ROOT, 'bench', 'profiles');
  try {
    log(`bench: ${JSON.stringify(params)} (temp ${dir})`);
    const loadBefore = round(loadavg()[0]!, 2);
    if (loadBefore > cpus().length / 2) log(`bench: WARNING the machine is busy (1-minute load average ${loadBefore} on ${cpus().length} cores): results will be noisy`);
    const loader = await ensureWrk(log, params.loader === 'autocannon');
    if (loader.kind === 'wrk') log(`bench: load by ${loader.version}${loader.installed ? ' (installed by this run)' : ''}`);
    else log(`bench: WARNING load by autocannon, not wrk: ${loader.fallback}; the load generator then takes CPU the proxies need`);
    const redis = await startRedis(dir);
    const upstream = await startService('upstream');
    const floor = await startService('floor', [`http://127.0.0.1:${upstream.port}`]);
    // Enough distinct users that no create round runs out (bcrypt tops out near 70/s per pool thread).
    const createUsers = params.scenarios.includes('tokens') ? params.duration * params.rounds * 600 + 1000 : 0;
    const setup = writeGatewayFiles(dir, upstream.port, createUsers);
    const gw = await startGateway(setup, redis.url, params.profile ? profileDir : undefined);
    const pair = await createTokens(gw.origin, USER, setup.password);
    const b: Bench = {
      params, loader, floor: `http://127.0.0.1:${floor.port}`, gateway: gw.origin, gatewayPid: gw.child.pid!,
      upstream: `http://127.0.0.1:${upstream.port}`, redisUrl: redis.url, gatewaySetup: setup,
      floorPid: floor.child.pid!, upstreamPid: upstream.child.pid!, redisPid: redis.child.pid!,
      bearer: `Bearer ${pair.accessToken}`, basic: basicHeader(BASIC_USER, setup.password), password: setup.password,
      createUsers, nextCreateUser: 0, gatewayRequests: 0, log,
    };
    log(`bench: upstream :${upstream.port} (${String(upstream.info.bytes)} B body), floor :${floor.port}, gateway :${new URL(gw.origin).port} (pid ${b.gatewayPid}), ${redis.url}`);

    // Warm-up, not recorded: JIT, connection pools, the Lua scripts.
    await warmUp(b, 'floor', b.bearer);
    await warmUp(b, 'gateway', b.bearer, b.basic);

    const rows: Row[] = [];
    // RSS of the gateway and the machine's 1-minute load average after each step (others' work skews results).
    const rss: { after: string; gatewayRequests: number; rssMb: number; loadavg1: number }[] = [];
    const checkpoint = async (after: string) => rss.push({ after, gatewayRequests: b.gatewayRequests, rssMb: round(await rssMb(b.gatewayPid), 1), loadavg1: round(loadavg()[0]!, 2) });
    await checkpoint('warm-up');
    const runners: Record<ScenarioId, () => Promise<Row | Row[]>> = {
      framework: () => frameworkScenario(b), bearer: () => bearerScenario(b), 'bearer-all-sources': () => bearerAllSourcesScenario(b), basic: () => basicScenario(b),
      'bearer-log': () => accessLogScenario(b), 'bearer-ratelimit': () => rateLimitScenario(b), 'api-key': () => apiKeyScenario(b), websocket: () => websocketScenario(b),
      'bearer-assertion': () => authzScenarios(b, { assertion: true, forwardAuth: false }),
      'forward-auth': () => authzScenarios(b, { assertion: false, forwardAuth: true }),
      tls: () => tlsScenario(b), h2: () => h2Scenario(b), grpc: () => grpcScenarios(b), 'ldap-basic': () => ldapBasicScenario(b),
      oidc: () => openidScenarios(b),
      latency: () => latencyScenario(b),
      tokens: () => tokensScenario(b), flood: () => floodScenario(b), soak: () => soakScenario(b),
      tracing: () => tracingScenarios(b),
    };
    for (const id of params.scenarios) {
      const t0 = Date.now();
      if (!(await settle(b.gatewayPid))) log(`bench: WARNING the gateway is still busy 10 s after the last scenario`);
      log(`bench: ${id} …`);
      const out = await runners[id]();
      rows.push(...(Array.isArray(out) ? out : [out]));
      await checkpoint(id);
      log(`bench: ${id} done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    }

    let profile: ReturnType<typeof summarizeProfile> | undefined;
    if (params.profile) {
      await stopChild(gw.child, 10_000); // the profile is written when the gateway exits
      const file = newestProfile(profileDir, started);
      if (file) profile = summarizeProfile(file);
      else log('bench: no .cpuprofile was written');
    }
    const gatewayLog = readFileSync(setup.logFile, 'utf8').split('\n').filter(Boolean);
    const results: Results = {
      date: new Date().toISOString(),
      machine: machine(),
      command: `npm run bench${argv.length ? ` -- ${argv.join(' ')}` : ''}`,
      params,
      scenarios: rows,
      setup: {
        connections: params.connections,
        loadGenerator: loaderText(loader),
        loader,
        upstreamBodyBytes: upstream.info.bytes,
        store: 'redis (redis-server of the bench, no persistence)',
        lockout: `addressBurst ${ADDRESS_BURST}, then 30 failures/min: all load comes from 127.0.0.1`,
        wallSeconds: Math.round((Date.now() - started) / 1000),
        loadavg1AtStart: loadBefore,
      },
      gatewayRss: rss,
      gatewayLog: { lines: gatewayLog.length, first: gatewayLog.slice(0, 5) },
      ...(profile ? { profile } : {}),
    };
    writeResults(join(ROOT, 'bench', 'results.json'), results);

    const out = [
      '', markdownTable(rows), '', provenance(results), '',
      `Notes: ${params.connections} connections; ${params.rounds} round(s) of ${params.duration} s, floor and the process under test alternating; medians of the rounds; ` +
        'both ratios are medians of per-round ratios to the floor. CPU: user + system time of the process under test per response, from /proc/PID/stat. ' +
        `Load: ${loaderText(loader)}.` +
        (params.scenarios.includes('latency') ? ' Latency: open-loop pacer (node:http), latency from hand-off to the agent.' : '') +
        (params.scenarios.includes('flood') ? ` Flood: a new user name per wrong password, all from one client (127.0.0.1) under the default brute-force policy (an address bursts ${ADDRESS_BURST} failures, then one check per 2 s): past it, cheap 429s.` : ''),
      ...rows.flatMap((r) => r.notes.map((n) => `- ${r.id}: ${n}`)),
      `- gateway RSS (1-min load average) after each step: ${rss.map((x) => `${x.after} ${x.rssMb} MB (${x.loadavg1})`).join(', ')}; load average at start ${loadBefore} on ${cpus().length} cores`,
      `- gateway log (warn and above): ${gatewayLog.length} lines${gatewayLog.length ? `, first: ${gatewayLog[0]}` : ''}`,
      ...(profile ? ['', profileTable(profile)] : []),
      '', `bench/results.json written; ${Math.round((Date.now() - started) / 1000)} s in all.`,
    ];
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

function loaderText(loader: Awaited<ReturnType<typeof ensureWrk>>): string {
  const rest = 'autocannon 9 (child process) for the token scenarios and the soak; an open-loop node:http pacer for fixed-rate latency and the flood';
  return loader.kind === 'wrk'
    ? `${loader.version} -t1 for fixed-request throughput; ${rest}`
    : `autocannon 9 (child process) for everything closed-loop, NOT wrk (${loader.fallback}); an open-loop node:http pacer for fixed-rate latency and the flood`;
}

process.on('exit', killAllNow);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`bench: ${signal}, stopping every child\n`);
    void stopAll().finally(() => {
      if (tempDir) rmSync(tempDir, { recursive: true, force: true });
      process.exit(130);
    });
  });
}
main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
