import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { readHtgroup } from '../authz/htgroup.js';
import { readHtpasswd } from '../credentials/htpasswd.js';
import { loadAssertionKeys } from '../identity/keys.js';
import { readTlsOptions } from '../http/tls.js';
import { loadKeys } from '../tokens/keys.js';
import { ConfigError } from './errors.js';
import { inspectConfigText } from './load.js';
import type { Config } from './types.js';

export interface Inspection {
  /** What could be read; undefined when the file could not be read or parsed. */
  config: Config | undefined;
  problems: string[];
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
    return { config: undefined, problems: [`${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`] };
  }
  const { config, problems } = inspectConfigText(text, path, env);
  if (!config) return { config, problems };
  const clean = (prefix: string) => !problems.some((p) => p.startsWith(prefix));
  const out: Inspection = { config, problems: [...problems] };
  if (config.users.htpasswd && clean('users.htpasswd')) {
    collect(out.problems, () => (out.users = readHtpasswd(config.users.htpasswd).size));
  }
  if (config.users.groups && clean('users.groups')) collect(out.problems, () => readHtgroup(config.users.groups!));
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
