// Reads a V8 .cpuprofile (node --cpu-prof) and lists where the self time went.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  fn: string;
  where: string;
  ms: number;
  pct: number;
}

export function newestProfile(dir: string, since: number): string | undefined {
  let best: { file: string; at: number } | undefined;
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.cpuprofile')) continue;
    const file = join(dir, name);
    const at = statSync(file).mtimeMs;
    if (at >= since && (!best || at > best.at)) best = { file, at };
  }
  return best?.file;
}

/**
 * Self time per function (name + file:line), and per area (a package, node internals, the gateway's src).
 * Percentages are of the busy time: (idle) is reported apart.
 */
export function summarizeProfile(file: string, top = 15): { busyMs: number; idleMs: number; functions: SelfTime[]; areas: SelfTime[] } {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const fnTime = new Map<string, { fn: string; where: string; us: number }>();
  const areaTime = new Map<string, number>();
  let total = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0;
    const frame = byId.get(id)!.callFrame;
    if (frame.functionName === '(idle)') {
      idle += us;
      return;
    }
    const where = frame.url ? `${shorten(frame.url)}:${frame.lineNumber + 1}` : '';
    const fn = frame.functionName || '(anonymous)';
    const key = `${fn} ${where}`;
    const entry = fnTime.get(key) ?? { fn, where, us: 0 };
    entry.us += us;
    fnTime.set(key, entry);
    const area = areaOf(frame.url, fn);
    areaTime.set(area, (areaTime.get(area) ?? 0) + us);
    total += us;
  });
  const pct = (us: number) => Math.round((1000 * us) / total) / 10;
  const functions = [...fnTime.values()].sort((a, b) => b.us - a.us).slice(0, top)
    .map((e) => ({ fn: e.fn, where: e.where, ms: Math.round(e.us / 1000), pct: pct(e.us) }));
  const areas = [...areaTime.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12)
    .map(([area, us]) => ({ fn: area, where: '', ms: Math.round(us / 1000), pct: pct(us) }));
  return { busyMs: Math.round(total / 1000), idleMs: Math.round(idle / 1000), functions, areas };
}

function shorten(url: string): string {
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) return url.slice(nm + 'node_modules/'.length);
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return url.slice(dist + 1);
  return url.replace(/^file:\/\//, '');
}

function areaOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + 'node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[1] ?? url.slice(5)}`;
  const src = /\/dist\/src\/([^/]+)/.exec(url);
  return src ? `gateway src/${src[1]}` : url;
}

export function profileTable(s: ReturnType<typeof summarizeProfile>): string {
  const rows = s.functions.map((f, i) => `| ${i + 1} | \`${f.fn}\` | ${f.where} | ${f.ms} | ${f.pct}% |`);
  const areas = s.areas.map((a) => `${a.fn} ${a.pct}%`).join(', ');
  return [`Gateway CPU profile (whole run), top ${s.functions.length} by self time: % of ${s.busyMs} ms busy (${s.idleMs} ms idle not counted)`, '',
    '| # | function | where | self ms | self % |', '|---:|---|---|---:|---:|', ...rows, '', `Self time by area: ${areas}`].join('\n');
}
