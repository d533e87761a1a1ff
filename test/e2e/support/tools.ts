import { spawn, spawnSync } from 'node:child_process';

/**
 * The third-party programs the e2e suite drives, each with the Debian package that ships it. A missing
 * one fails the test naming the package: CI installs them (.ci/run), so a skip would only hide a gap.
 */
const PACKAGES = {
  git: 'git',
  curl: 'curl',
  nginx: 'nginx',
  fcgiwrap: 'fcgiwrap',
  ab: 'apache2-utils',
  caddy: 'caddy',
  wrk: 'wrk',
  promtool: 'prometheus',
} as const;

export type Tool = keyof typeof PACKAGES;

/** The absolute path of the program, or an Error that says how to install it. */
export function requireTool(tool: Tool): string {
  const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' });
  const path = found.stdout.trim();
  if (found.status !== 0 || !path) {
    throw new Error(`${tool} is not installed: apt-get install ${PACKAGES[tool]} (.ci/run installs it)`);
  }
  return path;
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a program to its end without blocking the event loop (the gateway under test runs in this
 * process: spawnSync would stall it and deadlock the very request it waits for). Killed after timeoutMs.
 */
export function run(file: string, args: string[], options: { env?: Record<string, string>; cwd?: string; timeoutMs?: number; input?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', LANG: 'C', ...options.env },
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    if (options.input !== undefined) child.stdin!.end(options.input);
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
