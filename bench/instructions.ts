// npm run bench:instructions [-- --scenarios floor,bearer,bearer-all-sources,basic,grpc-floor,grpc --warm 3000 --requests 2000 --connections 8 --simulate]
//
// Instructions per proxied request, counted by valgrind's callgrind: the floor (bare http-proxy) and the
// gateway each run under callgrind, get `--warm` requests (JIT and caches settle), have their counters
// zeroed (callgrind_control -z), get `--requests` more and dump. Unlike CPU time, the count does not move
// with what else the machine runs (a 2-core machine shared with a load generator, other suites): a
// change's cost can be measured on a busy machine, to about ±10% between runs of the same code (the JIT
// and the garbage collector are not fully deterministic: count two builds at the same time to compare
// them). It counts instructions, not cycles: cache misses and syscalls cost more than their count says,
// so `npm run bench` stays the measure of CPU time and throughput. The load generator (a small
// keep-alive client) runs outside valgrind.
// The gateway uses the memory store: on the warm path (cached token and session, cached Basic password)
// neither store is asked, and this counts what a request costs, not a store. `bearer-all-sources` is
// `bearer` against a gateway that also has API keys and an OpenID issuer configured (a provider of
// bench/mini-provider.ts in this process, its keys fetched at start): beside `bearer`, what the other
// sources being on costs a request that is none of theirs.
// `grpc-floor` and `grpc` count the unary gRPC row of `npm run bench` (bench/grpc.ts) the same way: the
// bare node:http2 pass-through (h2c-floor.ts) and the gateway (server.h2c, an h2c upstream), each to
// grpc-upstream.ts, driven by a node:http2 client of this process (`--connections` sessions × 8 streams,
// a Bearer unary call each, its grpc-status 0 checked); their ratio is `grpc` over `grpc-floor`.
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { connect as connectH2, constants as h2, type ClientHttp2Session } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { hashSync } from '../src/credentials/bcrypt.js';
import { LIST_PATH } from './gateway.js';
import { issuerEntry, miniProvider, type MiniProvider } from './mini-provider.js';
import { benchScript, freePort, killAllNow, spawnTracked, startService, stopAll, stopChild, waitFor } from './procs.js';

const SCENARIOS = ['floor', 'bearer', 'bearer-all-sources', 'basic', 'grpc-floor', 'grpc'] as const;
type Scenario = (typeof SCENARIOS)[number];
/** The scenarios of the unary gRPC row, against the h2c upstream; the others go to the HTTP/1.1 one. */
const GRPC_SCENARIOS: readonly Scenario[] = ['grpc-floor', 'grpc'];
/** HTTP/2 streams in flight per connection, as bench/grpc.ts's h2load. */
const GRPC_STREAMS = 8;
/** The unary call's request: one frame of test.Msg { text: "hi" } (as bench/grpc.ts). */
const UNARY = Buffer.from([0, 0, 0, 0, 4, 0x0a, 0x02, 0x68, 0x69]);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SECRET = 'instructions-bench-secret-0123456789abcdef';
const USER = 'bench';
const PASSWORD = 'bench-password';

const { values } = parseArgs({
  options: {
    scenarios: { type: 'string', default: SCENARIOS.join(',') },
    warm: { type: 'string', default: '3000' },
    requests: { type: 'string', default: '2000' },
    connections: { type: 'string', default: '8' },
    simulate: { type: 'boolean', default: false },
  },
});
const scenarios = values.scenarios.split(',').map((s) => s.trim()) as Scenario[];
for (const s of scenarios) if (!SCENARIOS.includes(s)) throw new Error(`--scenarios: unknown ${s}; known: ${SCENARIOS.join(',')}`);
const warm = Number(values.warm);
const requests = Number(values.requests);
const connections = Number(values.connections);
/**
 * `--simulate`: callgrind's cache and branch simulators too (about twice as slow): per request, the
 * instruction-cache, data-cache and last-level misses and the mispredicted branches, which instructions
 * alone do not show and which make CPU time per request differ from the count.
 */
const simulate = values.simulate;

/** `n` GETs of the list path, `connections` at a time over keep-alive; throws on any answer but 200. */
async function load(port: number, n: number, headers: Record<string, string>): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  let left = n;
  let bad = 0;
  let resent = 0;
  // What the bad answers were (a status, or the client's error code), for the message.
  const seen = new Map<string, number>();
  const note = (what: string) => {
    bad++;
    seen.set(what, (seen.get(what) ?? 0) + 1);
  };
  const one = (): Promise<void> => new Promise<void>((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: LIST_PATH, agent, headers }, (res) => {
      if (res.statusCode !== 200) note(String(res.statusCode));
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      // A kept-alive socket the server closed as this request went out (its keep-alive timeout, which a
      // process slowed by valgrind on a busy machine can reach between two requests): sent again on a
      // new connection, as Node's documentation advises (request.reusedSocket).
      if (req.reusedSocket && err.code === 'ECONNRESET') {
        resent++;
        void one().then(resolve);
        return;
      }
      note(err.code ?? err.message);
      resolve();
    });
    req.end();
  });
  const worker = async () => {
    while (left-- > 0) await one();
  };
  await Promise.all(Array.from({ length: connections }, worker));
  agent.destroy();
  if (resent > 0) process.stderr.write(`  ${resent} of ${n} requests sent again: their kept-alive connection was closed as they went out\n`);
  if (bad > 0) throw new Error(`${bad} of ${n} requests were not answered 200 (${[...seen].map(([what, count]) => `${what} ×${count}`).join(', ')})`);
}

/**
 * `n` unary gRPC calls (as h2load sends them: a content-length, one message frame) over `connections`
 * h2c sessions, GRPC_STREAMS streams in flight on each; throws when more than 1 % did not answer HTTP 200
 * with grpc-status 0 in its trailers. A session the gateway closed is opened again: under valgrind a
 * gateway can take longer than its liveness probe allows to read a PING's answer (src/http/http2.ts).
 */
async function loadGrpc(port: number, n: number, headers: Record<string, string>): Promise<void> {
  const open = () => {
    const session = connectH2(`http://127.0.0.1:${port}`);
    session.on('error', () => {});
    return session;
  };
  const sessions: ClientHttp2Session[] = Array.from({ length: connections }, open);
  let left = n;
  let bad = 0;
  const one = (i: number) => new Promise<void>((resolve) => {
    if (sessions[i]!.closed || sessions[i]!.destroyed) sessions[i] = open();
    const stream = sessions[i]!.request({
      [h2.HTTP2_HEADER_METHOD]: 'POST', [h2.HTTP2_HEADER_PATH]: '/bench.Echo/Unary',
      'content-type': 'application/grpc', te: 'trailers', 'content-length': String(UNARY.length), ...headers,
    });
    let ok = false;
    stream.on('trailers', (t) => (ok = t['grpc-status'] === '0'));
    stream.on('error', () => {});
    stream.resume();
    stream.on('close', () => {
      if (!ok) bad++;
      resolve();
    });
    stream.end(UNARY);
  });
  const worker = async (i: number) => {
    while (left-- > 0) await one(i);
  };
  await Promise.all(sessions.flatMap((_, i) => Array.from({ length: GRPC_STREAMS }, () => worker(i))));
  for (const s of sessions) s.close();
  if (bad > n / 100) throw new Error(`${bad} of ${n} gRPC calls did not end with grpc-status 0`);
}

/** Whether anything answers HTTP on the port (any status). */
function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/healthz' }, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** valgrind's arguments before the node command line. */
function callgrind(out: string): string[] {
  return ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, '--dump-instr=no', ...(simulate ? ['--cache-sim=yes', '--branch-sim=yes'] : [])];
}

/** The events of the dump made after the zeroing (`part: 1`), by name: `Ir` (instructions), and with --simulate the misses and mispredictions. */
function countOf(dir: string, prefix: string): Map<string, number> {
  for (const name of readdirSync(dir)) {
    if (!name.startsWith(prefix)) continue;
    const text = readFileSync(join(dir, name), 'utf8');
    if (!/^part: 1$/m.test(text)) continue;
    const events = /^events: (.+)$/m.exec(text)?.[1]?.trim().split(/\s+/);
    const summary = /^summary: (.+)$/m.exec(text)?.[1]?.trim().split(/\s+/).map(Number);
    if (events && summary) return new Map(events.map((e, i) => [e, summary[i] ?? 0]));
  }
  throw new Error(`no callgrind dump of ${prefix} in ${dir}`);
}

/** Simulated events shown with --simulate: instruction-cache, data-cache and last-level misses, mispredicted branches. */
const SIMULATED: Array<[string, string[]]> = [
  ['I1 misses', ['I1mr']], ['D1 misses', ['D1mr', 'D1mw']], ['LL misses', ['ILmr', 'DLmr', 'DLmw']], ['branches mispredicted', ['Bcm', 'Bim']],
];

async function measure(dir: string, upstreamPort: number, scenario: Scenario, issuer: string): Promise<Map<string, number>> {
  const out = join(dir, `${scenario}.cg`);
  let child: ChildProcess;
  let port: number;
  let headers: Record<string, string> = {};
  const grpc = GRPC_SCENARIOS.includes(scenario);
  if (scenario === 'grpc-floor') {
    // The floor is sent a bearer token of a gateway token's length: HPACK never indexes Authorization, so
    // each call's token is decoded anew (about 5,000 instructions for the gateway's 400 characters).
    headers = { authorization: `Bearer ${randomBytes(300).toString('base64url')}` };
  }
  if (scenario === 'floor' || scenario === 'grpc-floor') {
    child = spawnTracked('valgrind', [...callgrind(out), process.execPath, benchScript(scenario === 'floor' ? 'floor' : 'h2c-floor'), `http://127.0.0.1:${upstreamPort}`]);
    port = await new Promise<number>((resolve, reject) => {
      let text = '';
      child.stdout!.on('data', (d: Buffer) => {
        text += d.toString();
        const m = /"port":(\d+)/.exec(text);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`the floor exited (${code})`)));
    });
  } else {
    port = await freePort();
    const config = join(dir, `gateway-${scenario}.yaml`);
    const others = scenario === 'bearer-all-sources' ? `apiKeys: {}\nidentity:\n  issuers:\n    - ${issuerEntry(issuer)}\n` : '';
    const upstream = grpc
      ? `{ url: "http://127.0.0.1:${upstreamPort}", protocol: h2c, timeouts: { responseMs: 10000 } }`
      : `{ url: "http://127.0.0.1:${upstreamPort}", timeouts: { responseMs: 10000 } }`;
    writeFileSync(config, `server: { host: 127.0.0.1, port: ${port}, shutdownGraceMs: 1000${grpc ? ', h2c: true' : ''} }
store: { kind: memory }
users: { htpasswd: ${join(dir, 'users.htpasswd')}, cacheTtlSeconds: 300 }
tokens: { signing: { alg: HS256, secret: "${SECRET}" } }
log: { level: warn, access: false }
admin: false
${others}upstreams:
  conversations: ${upstream}
routes:
  - { path: /v1/conversations, upstream: conversations, paging: { sortable: [campaignId] } }
  - { path: /bench.Echo, upstream: conversations }
`);
    child = spawnTracked('valgrind', [...callgrind(out), process.execPath, join(ROOT, 'dist/src/main.js'), 'serve', '--config', config]);
    // Under valgrind a start takes a while; a 401 is an answer: the gateway is up.
    const up = await waitFor(() => answers(port), 180_000);
    if (!up) throw new Error('the gateway did not start under valgrind within 180 s');
    if (scenario === 'basic') headers = { authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` };
    else headers = { authorization: `Bearer ${await token(port)}` };
  }
  const drive = grpc ? loadGrpc : load;
  await drive(port, warm, headers);
  execFileSync('callgrind_control', ['-z', String(child.pid)], { stdio: 'ignore' });
  await drive(port, requests, headers);
  execFileSync('callgrind_control', ['-d', String(child.pid)], { stdio: 'ignore' });
  await stopChild(child, 20_000);
  const events = countOf(dir, `${scenario}.cg`);
  for (const [name, n] of events) events.set(name, n / requests);
  return events;
}

function token(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/v1/tokens/create', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => (res.statusCode === 200 ? resolve((JSON.parse(body) as { accessToken: string }).accessToken) : reject(new Error(`token create: ${res.statusCode} ${body}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ appKey: USER, appSecret: PASSWORD }));
  });
}

async function main(): Promise<void> {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error('valgrind is not installed (Debian: apt-get install valgrind)');
  }
  const dir = mkdtempSync(join(tmpdir(), 'gw-instructions-'));
  let provider: MiniProvider | undefined;
  try {
    writeFileSync(join(dir, 'users.htpasswd'), `${USER}:${hashSync(PASSWORD, { cost: 4 })}\n`);
    const upstream = scenarios.some((s) => !GRPC_SCENARIOS.includes(s)) ? await startService('upstream') : undefined;
    const grpcUpstream = scenarios.some((s) => GRPC_SCENARIOS.includes(s)) ? await startService('grpc-upstream') : undefined;
    if (scenarios.includes('bearer-all-sources')) provider = await miniProvider();
    // One at a time: each count is its own process's, so running them together would change nothing but the wall time.
    const counts = new Map<Scenario, Map<string, number>>();
    for (const s of scenarios) {
      counts.set(s, await measure(dir, (GRPC_SCENARIOS.includes(s) ? grpcUpstream : upstream)!.port, s, provider?.issuer ?? ''));
      process.stderr.write(`${s}: ${Math.round(counts.get(s)!.get('Ir')!)} instructions per request\n`);
    }
    // Each row against its own floor: the gRPC rows against the h2c pass-through.
    const floorOf = (s: Scenario) => counts.get(GRPC_SCENARIOS.includes(s) ? 'grpc-floor' : 'floor');
    const columns: Array<[string, string[]]> = [['instructions', ['Ir']], ...(simulate ? SIMULATED : [])];
    const sum = (events: Map<string, number> | undefined, names: string[]) => (events ? names.reduce((t, e) => t + (events.get(e) ?? 0), 0) : 0);
    process.stdout.write(`| scenario | ${columns.map(([c]) => `${c} per request | × floor`).join(' | ')} |\n|---|${columns.map(() => '---|---|').join('')}\n`);
    for (const [s, events] of counts) {
      const floor = floorOf(s);
      const cells = columns.map(([, names]) => {
        const n = sum(events, names);
        const f = sum(floor, names);
        return `${Math.round(n)} | ${f ? (n / f).toFixed(2) : '–'}`;
      });
      process.stdout.write(`| ${s} | ${cells.join(' | ')} |\n`);
    }
  } finally {
    await provider?.close();
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

process.on('exit', killAllNow);
main().catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exitCode = 1;
});
