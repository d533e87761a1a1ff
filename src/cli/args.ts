import { parseArgs } from 'node:util';
import { nearest } from '../config/suggest.js';
import { COMMANDS, OPTIONS, type CommandSpec, type OptionName } from './commands.js';
import { UsageError } from './command-errors.js';

export type Invocation =
  | { kind: 'help'; command?: CommandSpec }
  | { kind: 'version' }
  | { kind: 'run'; command: CommandSpec; args: string[]; options: Partial<Record<OptionName, string | boolean>> };

const PARSE_OPTIONS = {
  ...Object.fromEntries(Object.entries(OPTIONS).map(([name, o]) => [name, 'short' in o ? { type: o.type, short: o.short } : { type: o.type }])),
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
} as const;

/** Reads a command line; anything it cannot take is a UsageError of one line, naming the command when known. */
export function parseCommandLine(argv: string[]): Invocation {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: PARSE_OPTIONS as NonNullable<Parameters<typeof parseArgs>[0]>['options'], allowPositionals: true, strict: true, tokens: true });
  } catch (err) {
    throw new UsageError(describeParseError(err), findCommand(lenientPositionals(argv))?.spec?.name);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const found = findCommand(parsed.positionals);
  if (values.version) return { kind: 'version' };
  if (values.help) {
    if (found && !('error' in found)) return { kind: 'help', command: found.spec };
    return { kind: 'help' };
  }
  if (!found) throw new UsageError('no command given');
  if ('error' in found) throw new UsageError(found.error);
  const { spec, rest } = found;
  if (rest.length > spec.positionals) {
    throw new UsageError(`${spec.name} takes ${spec.positionals === 0 ? 'no arguments' : `${spec.positionals} argument`}; unexpected "${rest[spec.positionals]}"`, spec.name);
  }
  if (rest.length < spec.positionals) throw new UsageError(`${spec.name} needs ${spec.synopsis.split(' ')[0]}`, spec.name);
  const options: Partial<Record<OptionName, string | boolean>> = {};
  for (const token of (parsed.tokens ?? []) as Array<{ kind: string; name?: string; rawName?: string }>) {
    if (token.kind !== 'option') continue;
    const name = token.name as OptionName;
    if (!spec.options.includes(name)) throw new UsageError(`${token.rawName} is not an option of ${spec.name}`, spec.name);
    options[name] = values[name] as string | boolean;
  }
  return { kind: 'run', command: spec, args: rest, options };
}

type Found = { spec: CommandSpec; rest: string[] } | { error: string; spec?: undefined };

/** The command named by the first one or two words (`serve`, `config check`). */
function findCommand(words: string[]): Found | undefined {
  if (words.length === 0) return undefined;
  const [first, second] = words as [string, string | undefined];
  const one = COMMANDS.find((c) => c.name === first);
  if (one) return { spec: one, rest: words.slice(1) };
  const two = COMMANDS.find((c) => c.name === `${first} ${second}`);
  if (two) return { spec: two, rest: words.slice(2) };
  const groups = [...new Set(COMMANDS.map((c) => c.name.split(' ')[0]!))];
  if (groups.includes(first)) {
    const subs = COMMANDS.filter((c) => c.name.startsWith(`${first} `)).map((c) => c.name);
    if (second === undefined) return { error: `${first} needs one of: ${subs.join(', ')}` };
    const hint = nearest(`${first} ${second}`, subs);
    return { error: `unknown command "${first} ${second}"${hint ? `; did you mean "${hint}"?` : ` (known: ${subs.join(', ')})`}` };
  }
  const hint = nearest(first, groups);
  return { error: `unknown command "${first}"${hint ? `; did you mean "${hint}"?` : ''}` };
}

/** Positionals as far as they can be told without knowing the options (for the usage after a parse error). */
function lenientPositionals(argv: string[]): string[] {
  try {
    return parseArgs({ args: argv, allowPositionals: true, strict: false }).positionals;
  } catch {
    return [];
  }
}

/** node:util parseArgs errors, as one line a person reads. */
function describeParseError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const option = /'([^']+)'/.exec(e.message ?? '')?.[1] ?? '';
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const name = option.replace(/^-+/, '').split('=')[0]!;
    const hint = nearest(name, [...Object.keys(OPTIONS), 'help', 'version']);
    return `unknown option ${option}${hint ? `; did you mean --${hint}?` : ''}`;
  }
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const long = /--([a-z-]+)/.exec(e.message ?? '')?.[1];
    const spec = long ? (OPTIONS as Record<string, { type: string }>)[long] : undefined;
    return spec?.type === 'boolean' ? `--${long} takes no value` : `--${long ?? option} needs a value`;
  }
  return (e.message ?? String(err)).split('\n')[0]!;
}
