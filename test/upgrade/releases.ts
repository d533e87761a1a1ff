import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The releases an installation may upgrade from, as recorded in releases.json, built from git: each is
 * the repository's tree at its commit (`git archive`), its own `npm ci` and `tsc` build, kept in a cache
 * outside the checkout ($GATEWAY_RELEASES_CACHE/<commit>, by default ~/.cache/auth-gateway-releases/<commit>:
 * a commit's build never changes, so every checkout and CI run on one machine shares it) and reused while it
 * is there. A fresh machine builds each once, a minute or two apiece on 2 cores.
 */
export interface Release {
  commit: string;
  name: string;
  what: string;
  /**
   * Whether the release reads the sessions the current build makes (same layout and claims): then a
   * pair made by the current build works on it too, beside and after a rollback. A release before the
   * session layout changed refuses them cleanly (401), while what it made keeps working on both.
   */
  sameSessions: boolean;
}

export const ROOT = resolve(import.meta.dirname, '../..');
/** How long a build waits for another process's build of the same release (then takes its lock over). */
const LOCK_WAIT_MS = 10 * 60_000;

export function recordedReleases(): Release[] {
  return (JSON.parse(readFileSync(join(ROOT, 'test/upgrade/releases.json'), 'utf8')) as { releases: Release[] }).releases;
}

function cacheRoot(): string {
  return process.env.GATEWAY_RELEASES_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'auth-gateway-releases');
}

/** The built release's folder (its `dist/src/main.js` is the CLI), building it first when it is not cached. */
export async function builtRelease(r: Release): Promise<string> {
  const dir = join(cacheRoot(), r.commit);
  if (existsSync(join(dir, '.built'))) return dir;
  // One build per release at a time: the suite's files run side by side and may want the same one.
  const lock = `${dir}.lock`;
  mkdirSync(cacheRoot(), { recursive: true });
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (existsSync(join(dir, '.built'))) return dir;
      // A lock left by a process that died mid-build is taken over once the wait is up.
      if (Date.now() > deadline) break;
      await new Promise((resolveWait) => setTimeout(resolveWait, 1000));
    }
  }
  try {
    if (existsSync(join(dir, '.built'))) return dir;
    return await build(r, dir);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

async function build(r: Release, dir: string): Promise<string> {
  const work = `${dir}.${process.pid}.tmp`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    // The commit must be in this clone: CI's has main's whole history.
    execFileSync('git', ['-C', ROOT, 'cat-file', '-e', `${r.commit}^{commit}`]);
    await run('sh', ['-c', `git -C "${ROOT}" archive --format=tar ${r.commit} | tar -x -C "${work}"`], work);
    await run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], work);
    await run(process.execPath, [join(work, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], work);
    writeFileSync(join(work, '.built'), `${r.commit}\n`);
    try {
      renameSync(work, dir);
    } catch (err) {
      // Another process built it meanwhile: theirs is as good.
      if (!existsSync(join(dir, '.built'))) throw err;
      rmSync(work, { recursive: true, force: true });
    }
    return dir;
  } catch (err) {
    rmSync(work, { recursive: true, force: true });
    throw err;
  }
}

function run(cmd: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_update_notifier: 'false' } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolvePromise() : reject(new Error(`${cmd} ${args.join(' ')} failed (${code}) in ${cwd}:\n${out.slice(-4000)}`))));
  });
}
