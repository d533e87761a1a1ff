// Issue 18's rows: the gateway with identity assertions on (a signed JWT on every proxied request,
// reused per user, groups and audience), and forward-auth answers per second with their CPU per answer.
// Both run on one gateway process of their own (the main one keeps the default configuration).
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fmtLatency, load, med, problems, type Bench, type Proc, type Row } from './context.js';
import { ADDRESS_BURST, call, createTokens, LIST_PATH, startGateway, USER, type GatewaySetup } from './gateway.js';
import { rssMb, stopChild } from './procs.js';
import { againstFloor, warmUp, type Goal } from './throughput.js';

/** Issue 18: assertions on keep at least this fraction of the floor's throughput. */
const ASSERTION_GOAL: Goal = { ratio: 0.8 };
const FORWARD_AUTH_PATH = '/auth/verify';

/** The gateway of issue 18: a groups file, forward-auth, ES256 assertions; otherwise the main configuration. */
function writeAuthzFiles(setup: GatewaySetup): GatewaySetup {
  const key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  writeFileSync(join(setup.dir, 'assertion-key.pem'), key);
  writeFileSync(join(setup.dir, 'users.groups'), `staff: ${USER}\nadmins: ${USER}\n`);
  const configFile = join(setup.dir, 'gateway-authz.yaml');
  writeFileSync(configFile, `# written by bench/authz.ts
server: { host: 127.0.0.1, port: 8080, trustProxy: false, shutdownGraceMs: 1000 }
store: { kind: redis, url: "\${REDIS_URL}" }
users: { htpasswd: users.htpasswd, groups: users.groups, cacheTtlSeconds: 300 }
tokens:
  issuer: auth-gateway
  audience: auth-gateway
  signing: { alg: HS256, secret: "\${GATEWAY_JWT_SECRET}" }
lockout: { maxFailuresPerUser: 10, addressBurst: ${ADDRESS_BURST}, addressFailuresPerMinute: 30, windowSeconds: 900 }
forwardAuth: { path: ${FORWARD_AUTH_PATH} }
identity:
  assertion: { keyFile: assertion-key.pem, alg: ES256, ttlSeconds: 60 }
upstreams:
  conversations: { url: "http://127.0.0.1:${setup.upstreamPort}", timeouts: { responseMs: 10000 } }
routes:
  - { path: /v1/conversations, upstream: conversations, paging: { sortable: [campaignId] }, allow: { groups: [staff] } }
log: { level: warn, access: false }
admin: { host: 127.0.0.1, port: 0 }
`);
  return { ...setup, configFile, logFile: join(setup.dir, 'gateway-authz.log') };
}

/** Both rows, on one gateway process: `bearer-assertion` against the floor, then `forward-auth`. */
export async function authzScenarios(b: Bench, which: { assertion: boolean; forwardAuth: boolean }): Promise<Row[]> {
  const setup = writeAuthzFiles(b.gatewaySetup);
  const gw = await startGateway(setup, b.redisUrl);
  try {
    const { accessToken } = await createTokens(gw.origin, USER, b.password);
    const bearer = `Bearer ${accessToken}`;
    const check = await call(gw.origin, 'GET', LIST_PATH, { authorization: bearer });
    if (check.status !== 200) throw new Error(`authz: the gateway answered ${check.status}; see ${setup.logFile}`);
    const proc: Proc = { name: 'authz', origin: gw.origin, pid: gw.child.pid! };
    await warmUp(b, proc, bearer);
    const rows: Row[] = [];
    if (which.assertion) {
      const row = await againstFloor(b, 'bearer-assertion', 'Bearer GET /v1/conversations, allow rule (a group) and an ES256 identity assertion to the upstream', proc, bearer, ASSERTION_GOAL);
      row.notes.unshift('identity.assertion ES256, ttlSeconds 60: one signature per user, groups and audience a minute, then reused; allow: { groups: [staff] } from an htgroup file');
      row.notes.push(`RSS of this gateway process after its rounds: ${(await rssMb(proc.pid)).toFixed(1)} MB`);
      rows.push(row);
    }
    if (which.forwardAuth) rows.push(await forwardAuthRow(b, proc, bearer));
    return rows;
  } finally {
    await stopChild(gw.child, 10_000);
  }
}

/**
 * Forward-auth answers per second and CPU per answer: what nginx's auth_request or Caddy's
 * forward_auth would ask for each request (bearer, an allow rule, an assertion in the answer). No
 * upstream is involved; the floor's proxied request of the same run is shown beside it for scale.
 */
async function forwardAuthRow(b: Bench, proc: Proc, bearer: string): Promise<Row> {
  const headers = { authorization: bearer, 'x-forwarded-method': 'GET', 'x-forwarded-uri': LIST_PATH, 'x-forwarded-host': 'api.example.com', 'x-forwarded-proto': 'https' };
  const probe = await call(proc.origin, 'GET', FORWARD_AUTH_PATH, headers);
  if (probe.status !== 200 || !probe.headers['x-identity-assertion']) throw new Error(`forward-auth: answered ${probe.status} without an assertion`);
  const rounds = [];
  const failures: string[] = [];
  for (let r = 0; r < b.params.rounds; r++) {
    const answers = await load(b, proc, { path: FORWARD_AUTH_PATH, headers });
    const floor = await load(b, 'floor', { path: LIST_PATH, headers: { authorization: bearer } });
    failures.push(...problems(`round ${r + 1} forward-auth`, answers));
    rounds.push({ answers, floor });
    b.log(`  forward-auth round ${r + 1}: ${fmtLatency(answers)} | floor (a proxied request) ${fmtLatency(floor)}`);
  }
  const cpuUs = med(rounds.map((x) => x.answers.cpu.proxyUs), 0);
  const floorCpuUs = med(rounds.map((x) => x.floor.cpu.proxyUs), 0);
  return {
    id: 'forward-auth',
    scenario: `GET ${FORWARD_AUTH_PATH} answers (Bearer, allow rule, ES256 assertion in the answer); no upstream`,
    rps: med(rounds.map((x) => x.answers.rps), 0),
    p50: med(rounds.map((x) => x.answers.p50)),
    p99: med(rounds.map((x) => x.answers.p99)),
    floorRps: med(rounds.map((x) => x.floor.rps), 0),
    ratio: med(rounds.map((x) => x.answers.rps / x.floor.rps), 3),
    cpuUs,
    floorCpuUs,
    cpuRatio: med(rounds.map((x) => x.answers.cpu.proxyUs / x.floor.cpu.proxyUs), 2),
    target: '(reference: answers/s and CPU per answer)',
    met: null,
    notes: [
      `CPU per answer ${cpuUs} µs (gateway), redis-server ${med(rounds.map((x) => x.answers.cpu.redisUs), 0)} µs; the floor column is a proxied request of the floor, for scale only`,
      ...failures,
    ],
    details: { rounds: rounds.map((x) => ({ rps: x.answers.rps, cpuUs: x.answers.cpu.proxyUs, floorRps: x.floor.rps })) },
  };
}
