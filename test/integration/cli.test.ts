import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

// `npm test` builds first (pretest); the CLI is tested as users run it.
const CLI = join(import.meta.dirname, '../../dist/src/main.js');
const CONFIG = join(import.meta.dirname, '../../config/gateway.yaml');
const run = (args: string[], env: Record<string, string> = {}, input?: string) =>
  spawnSync(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, ...env }, input, encoding: 'utf8', timeout: 10_000 });

describe('auth-gateway CLI', () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build (npm test does it first)`);

  it('config check passes on the shipped configuration with a secret set', () => {
    const r = run(['config', 'check', '--config', CONFIG], { GATEWAY_JWT_SECRET: 'x'.repeat(48) });
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/gateway\.yaml: ok \(2 routes, 2 upstreams, 1 users, store memory\)/);
    expect(r.status).toBe(0);
  });

  it('config check warns (and passes) when forward-auth answers any caller; trustedProxies silences it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-cli-fa-'));
    try {
      const shipped = readFileSync(CONFIG, 'utf8').replace('htpasswd: users.htpasswd', `htpasswd: ${join(dirname(CONFIG), 'users.htpasswd')}`);
      const open = join(dir, 'open.yaml');
      const gated = join(dir, 'gated.yaml');
      writeFileSync(open, `${shipped}\nforwardAuth: { path: /auth/verify }\n`);
      writeFileSync(gated, `${shipped}\nforwardAuth: { path: /auth/verify, trustedProxies: [10.0.0.0/8, "fd00::/8"] }\n`);
      const warned = run(['config', 'check', '--config', open], { GATEWAY_JWT_SECRET: 'x'.repeat(48) });
      expect(warned.status).toBe(0);
      expect(warned.stdout).toMatch(/open\.yaml: ok/);
      expect(warned.stderr).toBe('auth-gateway: warning: forwardAuth: /auth/verify answers any client that reaches this port, not only your proxy; set forwardAuth.trustedProxies to the addresses (or CIDR blocks) of the proxies that ask\n');
      const quiet = run(['config', 'check', '--config', gated], { GATEWAY_JWT_SECRET: 'x'.repeat(48) });
      expect(quiet.stderr).toBe('');
      expect(quiet.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to start without a signing secret, says why, and exits non-zero', () => {
    for (const command of [['config', 'check'], ['serve']]) {
      const r = run([...command, '--config', CONFIG]);
      expect(r.status).toBe(2);
      expect(r.stderr).toContain('tokens.signing.secret uses ${GATEWAY_JWT_SECRET}, which is not set in the environment');
    }
  });

  it('users hash prints an htpasswd line the gateway accepts', () => {
    const r = run(['users', 'hash', 'erin', '--cost', '4'], {}, 'erin-password\n');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^erin:\$2b\$04\$[./A-Za-z0-9]{53}\n$/);
  });

  it('says what is wrong, prints usage and exits 2 for an unknown command', () => {
    const r = run(['frobnicate']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^auth-gateway: usage error: unknown command "frobnicate"\n\nusage:/);
  });
});
