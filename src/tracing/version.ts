import { readFileSync } from 'node:fs';

/** The package's version for `service.version`: package.json is three folders up from dist/src/tracing (two from src/tracing). */
export function packageVersion(): string {
  for (const up of ['../../../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'auth-gateway' && pkg.version) return pkg.version;
    } catch {
      // not there; the next
    }
  }
  return 'unknown';
}
