// The markdown table, the one-line provenance, and bench/results.json.
import { renameSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import type { Params, Row } from './context.js';

export interface Results {
  date: string;
  machine: { cores: number; cpuModel: string; node: string; memoryGb: number };
  command: string;
  params: Params;
  scenarios: Row[];
  [extra: string]: unknown;
}

export function machine(): Results['machine'] {
  const list = cpus();
  return { cores: list.length, cpuModel: list[0]?.model.trim() ?? 'unknown', node: process.version, memoryGb: Math.round(totalmem() / 2 ** 30) };
}

const num = (v: number | null, digits = 0) => (v === null || Number.isNaN(v) ? '—' : digits ? v.toFixed(digits) : Math.round(v).toLocaleString('en-US'));

/**
 * Throughput and CPU per request side by side, each with its ratio to the floor of the same run; then
 * latency and the target. Rows that compare with something else than the floor say so in the scenario.
 */
export function markdownTable(rows: Row[]): string {
  const head = '| scenario | req/s | floor req/s | ratio | CPU µs/req | floor CPU µs/req | CPU ratio | p50 ms | p99 ms | target | met? |\n' +
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|:---:|';
  const lines = rows.map((r) => {
    const ratio = r.ratioText ?? (r.ratio === null ? '—' : r.ratio.toFixed(3));
    const met = r.met === null ? '—' : r.met ? 'yes' : '**no**';
    return `| ${r.scenario} | ${num(r.rps)} | ${num(r.floorRps)} | ${ratio} | ${num(r.cpuUs)} | ${num(r.floorCpuUs)} | ${num(r.cpuRatio, 2)} | ${num(r.p50, 2)} | ${num(r.p99, 2)} | ${r.target} | ${met} |`;
  });
  return [head, ...lines].join('\n');
}

export function provenance(r: Results): string {
  const m = r.machine;
  return `Measured ${r.date.slice(0, 10)} on ${m.cores} × ${m.cpuModel}, ${m.memoryGb} GB, Node ${m.node}: \`${r.command}\``;
}

export function writeResults(file: string, results: Results): void {
  writeFileSync(`${file}.tmp`, JSON.stringify(results, null, 2) + '\n');
  renameSync(`${file}.tmp`, file);
}
