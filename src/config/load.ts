import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { ConfigError } from './config-error.js';
import type { Config } from './types.js';
import { checkConfig } from './validate.js';
import { describeYamlErrors } from './yaml-errors.js';
import { keyLocator, type KeyLocator } from './yaml-lines.js';

export const DEFAULT_CONFIG_FILE = 'config/gateway.yaml';
const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** Reads, substitutes and validates a configuration file; throws ConfigError listing every problem. */
export function loadConfig(file: string, env: NodeJS.ProcessEnv = process.env): Config {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError([`${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  return parseConfig(text, path, env);
}

export function parseConfig(text: string, path: string, env: NodeJS.ProcessEnv = process.env): Config {
  const { config, problems } = inspectConfigText(text, path, env);
  if (!config || problems.length > 0) throw new ConfigError(problems);
  return config;
}

/**
 * Every problem of a configuration text at once: YAML syntax errors (with line and column), then
 * unset variables and schema problems. `config` is what could be read (undefined when the YAML could
 * not be parsed), for checks that go on past the schema (files, connections).
 */
export function inspectConfigText(text: string, path: string, env: NodeJS.ProcessEnv = process.env): { config: Config | undefined; problems: string[]; warnings: string[] } {
  const lines = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: true, lineCounter: lines });
  if (doc.errors.length > 0) {
    return {
      config: undefined,
      problems: describeYamlErrors(doc.errors, text).map((p) => `${path} is not valid YAML: ${p}`),
      warnings: [],
    };
  }
  const envProblems: string[] = [];
  const substituted = substitute(doc.toJS(), '', env, envProblems);
  applyEnvOverrides(substituted, env);
  const { config, problems, warnings } = checkConfig(substituted, path, dirname(path), withEnvOverrides(keyLocator(doc, lines), env));
  // A key whose variable is unset is named once, for the variable, not again as "required".
  const keysWithEnvProblems = envProblems.map((p) => p.split(' ')[0]);
  const rest = problems.filter((p) => !keysWithEnvProblems.includes(p.split(' ')[0]!));
  return { config, problems: [...envProblems, ...rest], warnings };
}

/** `${VAR}` and `${VAR:-default}` in string values, after parsing, so a value can never inject YAML. */
function substitute(value: unknown, key: string, env: NodeJS.ProcessEnv, problems: string[]): unknown {
  if (typeof value === 'string') {
    let missing = false;
    const out = value.replace(VAR, (_, name: string, fallback: string | undefined) => {
      const v = env[name];
      if (v !== undefined && v !== '') return v;
      if (fallback !== undefined) return fallback;
      missing = true;
      problems.push(`${key} uses \${${name}}, which is not set in the environment`);
      return '';
    });
    return missing ? undefined : out;
  }
  if (Array.isArray(value)) return value.map((v, i) => substitute(v, `${key}[${i}]`, env, problems));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, key ? `${key}.${k}` : k, env, problems)]));
  }
  return value;
}

/**
 * REDIS_URL selects the redis store with that URL (the single-node form: with store.cluster or
 * store.sentinel in the file, validation refuses the pair rather than silently pick one); PORT overrides the port.
 */
function applyEnvOverrides(raw: unknown, env: NodeJS.ProcessEnv): void {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return;
  const root = raw as Record<string, unknown>;
  if (env.REDIS_URL) {
    const store = isMapping(root.store) ? root.store : {};
    // Only a valid kind is overridden: a misspelt one (`redsi`) is still reported, not papered over.
    const kind = store.kind === undefined || store.kind === null || store.kind === 'memory' || store.kind === 'redis' ? 'redis' : store.kind;
    root.store = { ...store, kind, url: env.REDIS_URL };
  }
  if (env.PORT) root.server = { ...(isMapping(root.server) ? root.server : {}), port: env.PORT };
}

/** A key the environment set (applyEnvOverrides) is named as set by its variable, not by a line of the file. */
function withEnvOverrides(locate: KeyLocator, env: NodeJS.ProcessEnv): KeyLocator {
  const setBy = (key: string) =>
    (env.PORT && key === 'server.port' ? 'PORT' : env.REDIS_URL && key === 'store.url' ? 'REDIS_URL' : undefined);
  return {
    line: (key) => (setBy(key) ? undefined : locate.line(key)),
    where: (key) => {
      const variable = setBy(key);
      return variable ? `set by ${variable}` : locate.where(key);
    },
  };
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}
