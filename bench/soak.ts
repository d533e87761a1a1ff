// Scenario 6: RSS of a gateway process after N/5 and after N soak requests (Bearer GET, full speed),
// with checkpoints in between so a slope shows. The soak has a fresh gateway process of its own (the
// main gateway's configuration), so what earlier scenarios left in the main one's heap is not counted.
import { createTokens, LIST_PATH, startGateway, USER, writeVariantFiles } from './gateway.js';
import { load, med, problems, type Bench, type Proc, type Row } from './context.js';
import { memory, rssMb, stopChild } from './procs.js';
import { round } from './stats.js';
import { warmUp } from './throughput.js';

const RSS_LIMIT_MB = 150;
/** Allowed RSS difference between the first and the last checkpoint (GC timing moves RSS a little). */
const GROWTH_TOLERANCE_MB = 10;
const FIRST_CHECKPOINT = 200_000;
const LATER_SEGMENTS = 4;

export async function soakScenario(b: Bench): Promise<Row> {
  // The main gateway's configuration (access log off, no rate limit), its own log file.
  const setup = writeVariantFiles(b.gatewaySetup, { name: 'soak' });
  const gw = await startGateway(setup, b.redisUrl);
  try {
    // Its own token: every gateway process signs with its own key.
    const { accessToken } = await createTokens(gw.origin, USER, b.password);
    const proc: Proc = { name: 'soak gateway', origin: gw.origin, pid: gw.child.pid! };
    return await soak(b, proc, `Bearer ${accessToken}`);
  } finally {
    await stopChild(gw.child, 10_000);
  }
}

async function soak(b: Bench, proc: Proc, bearer: string): Promise<Row> {
  await warmUp(b, proc, bearer);
  // The first checkpoint at 200k requests (or a fifth of a shorter soak), then four equal steps to the end.
  const first = Math.min(FIRST_CHECKPOINT, Math.ceil(b.params.soakRequests / 5));
  const sizes = [first, ...Array.from({ length: LATER_SEGMENTS }, () => Math.ceil((b.params.soakRequests - first) / LATER_SEGMENTS))];
  const before = await rssMb(proc.pid);
  const checkpoints: { soakRequests: number; rssMb: number; anonMb: number }[] = [];
  const segments = [];
  const notes: string[] = [];
  let done = 0;
  for (const [s, amount] of sizes.entries()) {
    // A request count, so autocannon (wrk only stops on time); RSS is the measure here, not throughput.
    const seg = await load(b, proc, { path: LIST_PATH, headers: { authorization: bearer }, amount });
    notes.push(...problems(`segment ${s + 1}`, seg));
    done += seg.total;
    segments.push(seg);
    const mem = await memory(proc.pid);
    const rss = round(mem.rssMb, 1);
    checkpoints.push({ soakRequests: done, rssMb: rss, anonMb: round(mem.anonMb, 1) });
    b.log(`  soak ${done} requests: RSS ${rss} MB (anonymous ${round(mem.anonMb, 1)} MB), ${Math.round(seg.rps)} req/s, p99 ${seg.p99.toFixed(2)} ms`);
  }
  const start = checkpoints[0]!;
  const last = checkpoints[checkpoints.length - 1]!;
  const peak = Math.max(...checkpoints.map((c) => c.rssMb));
  const growth = round(last.rssMb - start.rssMb, 1);
  const seconds = segments.reduce((sum, x) => sum + x.durationS, 0);
  const okCount = segments.reduce((sum, x) => sum + x.ok, 0);
  return {
    id: 'soak',
    scenario: `Soak: RSS after ${start.soakRequests} and ${last.soakRequests} Bearer GETs`,
    rps: Math.round(okCount / seconds),
    p50: med(segments.map((x) => x.p50)),
    p99: med(segments.map((x) => x.p99)),
    floorRps: null,
    ratio: null,
    cpuUs: med(segments.map((x) => x.cpu.proxyUs), 0),
    floorCpuUs: null,
    cpuRatio: null,
    ratioText: `RSS ${start.rssMb} → ${last.rssMb} MB`,
    target: `peak RSS < ${RSS_LIMIT_MB} MB, growth ≤ ${GROWTH_TOLERANCE_MB} MB`,
    met: notes.length === 0 && peak < RSS_LIMIT_MB && growth <= GROWTH_TOLERANCE_MB,
    notes: [`on a fresh gateway process (the main gateway's configuration), warmed up with Bearer GETs; RSS before the soak ${round(before, 1)} MB; checkpoints ${checkpoints.map((c) => `${c.soakRequests}: ${c.rssMb} MB`).join(', ')}; peak ${peak} MB; RssAnon (without the mapped node binary) ${start.anonMb} → ${last.anonMb} MB`, ...notes],
    details: { rssBeforeMb: round(before, 1), checkpoints, growthMb: growth, segments },
  };
}
