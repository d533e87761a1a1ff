import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { candidatePort } from '../../support/process.js';
import { listening, stopChild } from './nginx.js';
import { requireTool } from './tools.js';

export interface Caddy {
  port: number;
  dir: string;
  output(): string;
  stop(): Promise<void>;
}

/**
 * A real Caddy of the test's own, from a Caddyfile: `sites(port)` gives the site blocks, `globals` more global
 * options (lines inside the global block). No admin
 * endpoint, no automatic HTTPS, and its data and config directories in a temp directory (Caddy writes
 * its autosave there), on a free loopback port. Stopped (and its directory removed) by stop().
 */
export async function startCaddy(sites: (port: number) => string, globals = ''): Promise<Caddy> {
  const caddy = requireTool('caddy');
  const dir = mkdtempSync(join(tmpdir(), 'gw-e2e-caddy-'));
  let lastOutput = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    // Caddy cannot be told to take any free port and report it: a port picked first, and on a failed
    // start (another process took it) another one.
    const port = await candidatePort();
    const file = join(dir, 'Caddyfile');
    writeFileSync(file, `{\n\tadmin off\n\tauto_https off\n\tstorage file_system ${join(dir, 'data')}\n${globals}}\n\n${sites(port)}\n`);
    const child = spawn(caddy, ['run', '--config', file, '--adapter', 'caddyfile', '--pidfile', join(dir, 'caddy.pid')], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, XDG_DATA_HOME: join(dir, 'xdg-data'), XDG_CONFIG_HOME: join(dir, 'xdg-config') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    if (await listening(port, child, join(dir, 'caddy.pid'), 10_000)) {
      return {
        port, dir, output: () => output,
        stop: async () => {
          await stopChild(child, 'SIGTERM');
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    await stopChild(child, 'SIGKILL');
    lastOutput = output;
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`caddy did not start:\n${lastOutput}`);
}
