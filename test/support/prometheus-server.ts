import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { candidatePort } from './process.js';

/** One series of an instant query's answer. */
interface PromSeries {
  metric: Record<string, string>;
  value: [number, string];
}

interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
}

/** A real Prometheus (the Debian package `prometheus`) scraping the given targets with the given rule files. */
export interface TestPrometheus {
  url: string;
  /** An instant query: throws with Prometheus's error when it does not parse or fails. */
  query(expr: string): Promise<PromSeries[]>;
  alerts(): Promise<PromAlert[]>;
  /** Whether every target was scraped and is up. */
  targetsUp(): Promise<boolean>;
  stop(): Promise<void>;
}

export interface PrometheusOptions {
  job: string;
  targets: string[];
  ruleFiles: string[];
  /** Scrape and rule evaluation interval (default 1s: a test sees changes within seconds). */
  interval?: string;
}

/** Starts prometheus on a free port (another one when the port was taken meanwhile); resolves once it is ready. */
export async function startPrometheus(options: PrometheusOptions): Promise<TestPrometheus> {
  const binary = prometheusBinary();
  const dir = mkdtempSync(join(tmpdir(), 'prometheus-'));
  const interval = options.interval ?? '1s';
  const config = join(dir, 'prometheus.yml');
  writeFileSync(config, JSON.stringify({
    global: { scrape_interval: interval, evaluation_interval: interval, scrape_timeout: interval },
    rule_files: options.ruleFiles,
    scrape_configs: [{ job_name: options.job, static_configs: [{ targets: options.targets }] }],
  }));
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await candidatePort();
    const child = spawn(binary, [
      `--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`,
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const url = `http://127.0.0.1:${port}`;
    if (await ready(url, child)) return handle(url, child, dir);
    child.kill('SIGKILL');
    if (!/address already in use/.test(output)) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`prometheus did not start:\n${output}`);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error('prometheus found no free port in 5 tries');
}

/** The prometheus server's path; a missing one fails the test naming the Debian package (as requireTool does). */
function prometheusBinary(): string {
  const found = spawnSync('sh', ['-c', 'command -v prometheus'], { encoding: 'utf8' });
  const path = found.stdout.trim();
  if (found.status !== 0 || !path) throw new Error('prometheus is not installed: apt-get install prometheus (.ci/run installs it)');
  return path;
}

async function ready(url: string, child: ChildProcess): Promise<boolean> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && child.exitCode === null) {
    try {
      if ((await fetch(`${url}/-/ready`)).status === 200) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

function handle(url: string, child: ChildProcess, dir: string): TestPrometheus {
  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}${path}`);
    const body = await res.json() as { status: string; data: T; error?: string; errorType?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.errorType ?? ''} ${body.error ?? ''}`);
    return body.data;
  };
  return {
    url,
    query: async (expr) => (await api<{ result: PromSeries[] }>(`/api/v1/query?query=${encodeURIComponent(expr)}`)).result,
    alerts: async () => (await api<{ alerts: PromAlert[] }>('/api/v1/alerts')).alerts,
    targetsUp: async () => {
      const { activeTargets } = await api<{ activeTargets: Array<{ health: string }> }>('/api/v1/targets');
      return activeTargets.length > 0 && activeTargets.every((t) => t.health === 'up');
    },
    stop: () => new Promise((resolve) => {
      const done = () => {
        rmSync(dir, { recursive: true, force: true });
        resolve();
      };
      if (child.exitCode !== null) return done();
      child.once('exit', done);
      child.kill('SIGTERM');
    }),
  };
}
