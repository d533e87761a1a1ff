import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

/** A gateway of the smallest configuration (no upstreams: none is needed to stand idle). */
const YAML = `server: { host: 127.0.0.1, port: 0 }
store: { kind: memory }
users: { htpasswd: users.htpasswd }
tokens: { signing: { alg: HS256, secret: ${'s'.repeat(48)} } }
log: { level: silent }
admin: false
`;

const dist = (path: string) => pathToFileURL(join(import.meta.dirname, '../../dist', path)).href;

/**
 * A process that runs nextTicks, goes quiet while a full collection runs (none of them alive), then runs
 * nextTicks again, and prints V8's feedback for process.nextTick: the state of each computed key of its
 * queue entries' literal (`DefineKeyedOwnPropertyInLiteral <STATE>`, from %DebugPrint).
 */
function literalStates(setup: string): string[] {
  const script = `
    ${setup}
    const tick = () => new Promise((resolve) => process.nextTick(resolve));
    for (let i = 0; i < 3000; i++) await tick();
    // A timer turn later no entry is alive. V8 keeps shapes that feedback points at for two more
    // collections (--retain-maps-for-n-gc), so the fourth is past that.
    await new Promise((resolve) => setTimeout(resolve, 20));
    for (let i = 0; i < 4; i++) globalThis.gc();
    for (let i = 0; i < 3000; i++) await tick();
    new Function('f', '%DebugPrint(f)')(process.nextTick);
    process.exit(0);`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', '--input-type=module', '-e', script], {
    env: { ...process.env, GATEWAY_YAML: YAML }, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, timeout: 20_000,
  });
  expect(r.status, r.stderr).toBe(0);
  return [...r.stdout.matchAll(/DefineKeyedOwnPropertyInLiteral (\w+)/g)].map((m) => m[1]!);
}

describe('the nextTick entry shape', () => {
  it('stays monomorphic through a full collection in an idle gateway process', () => {
    const states = literalStates(`
      const { createGateway } = await import(${JSON.stringify(dist('src/server.js'))});
      const { parseConfig } = await import(${JSON.stringify(dist('src/config/load.js'))});
      const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
      const { join } = await import('node:path');
      const dir = mkdtempSync(join((await import('node:os')).tmpdir(), 'gw-tick-'));
      writeFileSync(join(dir, 'users.htpasswd'), '');
      const gateway = createGateway(parseConfig(process.env.GATEWAY_YAML, join(dir, 'gateway.yaml')));
      await gateway.listen();
      await gateway.close(0);
      rmSync(dir, { recursive: true });`);
    // The literal's four keys: two computed, `callback`, `args`.
    expect(states).toHaveLength(4);
    expect(states).not.toContain('MEGAMORPHIC');
  });

  it('turns megamorphic for good without it (the engine this guards against)', () => {
    const states = literalStates('');
    expect(states).toHaveLength(4);
    // V8 11.3 (Node 20). Should a later engine keep the state, holdTickShape is harmless and this case
    // only records that the guard is no longer needed.
    if (process.versions.v8.startsWith('11.3.')) expect(states.slice(1)).toEqual(['MEGAMORPHIC', 'MEGAMORPHIC', 'MEGAMORPHIC']);
  });
});
