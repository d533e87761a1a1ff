import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { readHtgroup, type GroupTable } from '../authz/htgroup.js';
import { readHtpasswd } from '../credentials/htpasswd.js';
import { loadAssertionKeys } from '../identity/keys.js';
import { readTlsOptions } from '../http/tls.js';
import { loadKeys } from '../tokens/keys.js';
import { allowNameWarnings } from './authz.js';
import { ConfigError } from './errors.js';
import { inspectConfigText } from './load.js';
import type { Config } from './types.js';
import { locatorOf } from './yaml-lines.js';

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
 * the configuration names (htpasswd, htgroup, key files, TLS certificate and key), each checked even when other
 * keys are wrong, unless its own key already has a problem.
 */
export function inspectConfig(file: string, env: NodeJS.ProcessEnv = process.env): Inspection {
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
  let names: Set<string> | undefined;
  let groups: GroupTable | undefined;
  if (config.users.htpasswd && clean('users.htpasswd')) {
    collect(out.problems, () => {
      names = new Set(readHtpasswd(config.users.htpasswd).keys());
      out.users = names.size;
    });
  }
  if (config.users.groups && clean('users.groups')) collect(out.problems, () => (groups = readHtgroup(config.users.groups!)));
  if (names || groups) {
    const locate = locatorOf(text);
    const at = (key: string) => (locate(key) === undefined ? key : `${key} (line ${locate(key)})`);
    out.warnings.push(...allowNameWarnings(config.routes, names, groups, at));
  }
  if (clean('tokens.signing') && clean('tokens.verificationKeys')) collect(out.problems, () => loadKeys(config.tokens));
  const assertion = config.identity.assertion;
  if (assertion?.keyFile && clean('identity.assertion')) collect(out.problems, () => loadAssertionKeys(assertion.keyFile, assertion.alg));
  const tls = config.server.tls;
  if (tls && tls.certFile && tls.keyFile && clean('server.tls')) collect(out.problems, () => readTlsOptions(tls));
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
