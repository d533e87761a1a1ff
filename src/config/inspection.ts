import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { allowNameWarnings } from './authz-settings.js';
import { ConfigError } from './config-error.js';
import { inspectConfigText } from './load.js';
import type { Config } from './types.js';
import { locatorOf } from './yaml-lines.js';

/**
 * A file the configuration names, read and checked at load time by the part that reads it (the users
 * file, the groups file, key files, the TLS certificate): each part declares its own check, and the
 * composition root lists them (src/inspect.ts), so this module knows none of them.
 */
export interface FileCheck {
  /** The keys whose files it reads: skipped when one of them already has a problem. */
  keys: readonly string[];
  /** Whether the configuration names such a file. */
  applies(config: Config): boolean;
  /** Reads and checks it; throws ConfigError. May say which user or group names the file defines. */
  run(config: Config): void | KnownNames;
}

/** Names a file defines, for the allow rules' warnings. */
interface KnownNames {
  users?: ReadonlySet<string>;
  groups?: ReadonlyMap<string, readonly string[]>;
}

export interface Inspection {
  /** What could be read; undefined when the file could not be read or parsed. */
  config: Config | undefined;
  problems: string[];
  /** What serves but was most likely not meant (`config check` prints them; a start does not refuse them). */
  warnings: string[];
  /** Users in the htpasswd file, when it could be read. */
  users?: number;
}

/**
 * Everything a start would refuse, in one pass: the YAML, the variables and the schema, then the files
 * the configuration names (each part's FileCheck: htpasswd, htgroup, key files, TLS certificate and key),
 * each checked even when other keys are wrong, unless its own key already has a problem.
 */
export function inspectConfig(file: string, checks: readonly FileCheck[], env: NodeJS.ProcessEnv = process.env): Inspection {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { config: undefined, problems: [`${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`], warnings: [] };
  }
  const { config, problems, warnings } = inspectConfigText(text, path, env);
  if (!config) return { config, problems, warnings };
  const clean = (prefix: string) => !problems.some((p) => p.startsWith(prefix));
  const out: Inspection = { config, problems: [...problems], warnings: [...warnings] };
  const known: KnownNames = {};
  for (const check of checks) {
    if (!check.applies(config) || !check.keys.every(clean)) continue;
    collect(out.problems, () => {
      const names = check.run(config);
      if (names?.users) {
        known.users = names.users;
        out.users = names.users.size;
      }
      if (names?.groups) known.groups = names.groups;
    });
  }
  if (known.users || known.groups) {
    const locate = locatorOf(text);
    const at = (key: string) => (locate.line(key) === undefined ? key : `${key} (line ${locate.line(key)})`);
    // Names the directory may know are not typos of the files' names.
    const ldap = config.users.ldap;
    out.warnings.push(...allowNameWarnings(config.routes, ldap ? undefined : known.users, ldap?.groupsBase ? undefined : known.groups, at));
  }
  return out;
}

function collect(problems: string[], check: () => unknown): void {
  try {
    check();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(...err.problems);
  }
}
