import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError } from '../config/config-error.js';
import { inspectConfig } from '../inspect.js';
import { inspectConfigText } from '../config/load.js';
import type { Config } from '../config/types.js';

/**
 * The whole configuration, refused with every problem at once (the files it names included); its
 * warnings (a retired setting still read, a lower-case method) are handed to `warnings`.
 */
export function loadChecked(file: string, warnings: (warnings: string[]) => void = () => {}): Config {
  const { config, problems, warnings: found } = inspectConfig(file);
  if (!config || problems.length > 0) throw new ConfigError(problems);
  warnings(found);
  return config;
}

/**
 * The configuration as a command that needs only some sections sees it (`sessions list` needs `store`):
 * problems of other sections (an unset GATEWAY_JWT_SECRET, a missing htpasswd file) are not its concern,
 * problems of the file itself (YAML) and of those sections are.
 */
export function loadSections(file: string, sections: readonly string[], ignore: (problem: string) => boolean = () => false): Config {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError([`${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  const { config, problems } = inspectConfigText(text, path);
  const relevant = problems.filter((p) => concerns(p, path, sections) && !ignore(p));
  if (!config || relevant.length > 0) throw new ConfigError(relevant.length > 0 ? relevant : problems);
  return config;
}

/** A problem names its key first; one about the file as a whole names the file or `(root)`. */
function concerns(problem: string, path: string, sections: readonly string[]): boolean {
  if (problem.startsWith(path) || problem.startsWith('(root)')) return true;
  const key = problem.split(' ')[0]!;
  return sections.some((s) => key === s || key.startsWith(`${s}.`) || key.startsWith(`${s}[`));
}

/**
 * The configuration as `auth-gateway recipe` reads it: the sections a recipe is made from. A recipe holds no
 * secret, so a variable of one that is not set here (a client secret) is no concern of it.
 */
export function loadRecipeConfig(file: string): Config {
  return loadSections(file, ['server', 'upstreams', 'routes', 'forwardAuth', 'login', 'identity', 'apiKeys'], (problem) => problem.endsWith('which is not set in the environment'));
}
