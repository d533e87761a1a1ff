#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import type { ReadStream } from 'node:tty';
import { clearLockout, listSessions, lockoutTarget, revokeSessions } from './cli/admin.js';
import { parseCommandLine } from './cli/args.js';
import { COMMANDS, commandUsage, usage, type CommandSpec } from './cli/commands.js';
import { loadChecked, loadRecipeConfig, loadSections } from './cli/config.js';
import { checkConnections } from './cli/connect.js';
import { keysCommand } from './cli/api-key-commands.js';
import { storeUserWarnings, storeUsersCommand } from './cli/store-user-commands.js';
import { CommandError, ConnectionCheckError, PasswordRefusedError, UsageError } from './cli/command-errors.js';
import { PromptCancelled, readHidden } from './cli/prompt.js';
import { ConfigError } from './config/config-error.js';
import { forwardAuthWarnings } from './authz/forward-auth-config.js';
import { inspectConfig } from './inspect.js';
import { DEFAULT_CONFIG_FILE } from './config/load.js';
import { hash } from './credentials/bcrypt.js';
import { acceptablePassword } from './credentials/password-verifier.js';
import { createLogger, exitAfterFlush, type Logger } from './log.js';
import { serve } from './run.js';
import { RECIPE_KINDS, recipe, RecipeError, type RecipeKind } from './recipes/recipes.js';

/** The running gateway's logger: a fatal error is logged in the same ordered stream. */
let serveLog: Logger | undefined;

/** Below this, bcrypt is cheap enough to guess at offline from a leaked file (OWASP: at least 10). */
const MIN_RECOMMENDED_COST = 10;
/** NIST SP 800-63B: memorized secrets of at least 8 characters. */
export const MIN_PASSWORD_CHARACTERS = 8;

/** Runs one command line; the exit code, or -1 while the gateway serves. */
async function main(argv: string[]): Promise<number> {
  const call = parseCommandLine(argv);
  if (call.kind === 'version') return print(version());
  if (call.kind === 'help') return print(call.command ? commandUsage(call.command) : usage());
  const { command, args, options } = call;
  const file = typeof options.config === 'string' ? options.config : DEFAULT_CONFIG_FILE;
  const user = typeof options.user === 'string' ? options.user : undefined;
  const address = typeof options.address === 'string' ? options.address : undefined;
  switch (command.name) {
    case 'serve': {
      let warnings: string[] = [];
      const config = loadChecked(file, (found) => (warnings = found));
      serveLog = createLogger(config.log.level);
      // A retired setting is still served, and said once at start (`config check` lists the same).
      for (const warning of warnings) serveLog.warn('configuration warning (see `auth-gateway config check`)', { warning });
      await serve(config, serveLog, { watch: options.watch === true });
      return -1;
    }
    case 'config check':
      return checkConfig(file, options.connect === true);
    case 'recipe':
      return printRecipe(args[0]!, file, options);
    case 'users hash':
      return hashUser(command, args[0]!, typeof options.cost === 'string' ? options.cost : String(MIN_RECOMMENDED_COST));
    case 'sessions list':
    case 'sessions revoke': {
      if (!user) throw new UsageError(`${command.name} needs --user NAME`, command.name);
      const config = loadSections(file, ['store']);
      return print(await (command.name === 'sessions list' ? listSessions(config, user) : revokeSessions(config, user)));
    }
    case 'lockout clear': {
      const target = lockoutTarget(user, address);
      return print(await clearLockout(loadSections(file, ['store', 'lockout']), target));
    }
    case 'users add':
    case 'users passwd':
    case 'users remove':
    case 'users groups':
    case 'users list':
    case 'users import':
      return print(await storeUsersCommand(command.name, args, options, loadSections(file, ['store', 'users'])));
    case 'keys create':
    case 'keys list':
    case 'keys revoke':
    case 'keys rotate': {
      const out = await keysCommand(command.name, args, options, loadSections(file, ['store', 'apiKeys']));
      if (out.stderr) process.stderr.write(`auth-gateway: ${out.stderr}\n`);
      return print(out.stdout);
    }
    default:
      throw new UsageError(`unknown command "${command.name}"`);
  }
}

async function checkConfig(file: string, connect: boolean): Promise<number> {
  const inspected = inspectConfig(file);
  const { config, problems, users } = inspected;
  const warnings = [...inspected.warnings, ...(config ? forwardAuthWarnings(config) : [])];
  // Warnings first, whatever follows: they never change the exit code.
  for (const w of warnings) process.stderr.write(`auth-gateway: warning: ${w}\n`);
  const unreachable: string[] = [];
  if (config && connect) {
    for (const r of await checkConnections(config)) {
      if (r.ok) process.stdout.write(`${r.what}: ${r.detail}\n`);
      else unreachable.push(`${r.what} ${r.detail}`);
    }
    // What only the store can tell (its users), once it answers.
    for (const w of await storeUserWarnings(config)) {
      warnings.push(w);
      process.stderr.write(`auth-gateway: warning: ${w}\n`);
    }
  }
  if (!config || problems.length > 0) {
    // Both kinds, each under its own label; the configuration's problems decide the exit code.
    if (unreachable.length > 0) report(new ConnectionCheckError(unreachable));
    throw new ConfigError(problems);
  }
  if (unreachable.length > 0) throw new ConnectionCheckError(unreachable);
  const warned = warnings.length === 0 ? '' : `; ${warnings.length} warning${warnings.length === 1 ? '' : 's'} above`;
  return print(`${config.file}: ok (${config.routes.length} routes, ${Object.keys(config.upstreams).length} upstreams, ${users ?? 0} users, store ${config.store.kind}${warned})`);
}

function printRecipe(kind: string, file: string, options: Record<string, string | boolean | undefined>): number {
  if (!(RECIPE_KINDS as readonly string[]).includes(kind)) throw new UsageError(`recipe: no recipe for "${kind}"; one of ${RECIPE_KINDS.join(', ')}`, 'recipe');
  const config = loadRecipeConfig(file);
  try {
    const made = recipe(kind as RecipeKind, config, {
      listen: typeof options.listen === 'string' ? options.listen : undefined,
      gateway: typeof options.gateway === 'string' ? options.gateway : undefined,
    }, file);
    for (const w of made.warnings) process.stderr.write(`auth-gateway: warning: ${w}\n`);
    process.stdout.write(made.text);
    return 0;
  } catch (err) {
    if (err instanceof RecipeError) throw new UsageError(`recipe: ${err.message}`, 'recipe');
    throw err;
  }
}

async function hashUser(command: CommandSpec, name: string, costText: string): Promise<number> {
  if (name.includes(':')) throw new UsageError('a user name must not contain ":"', command.name);
  const cost = /^\d+$/.test(costText) ? Number(costText) : NaN;
  if (!(cost >= 4 && cost <= 31)) throw new UsageError('--cost must be an integer from 4 to 31', command.name);
  if (cost < MIN_RECOMMENDED_COST) {
    process.stderr.write(`auth-gateway: warning: bcrypt cost ${cost} is below ${MIN_RECOMMENDED_COST}; a leaked hash is that much cheaper to crack (use it for tests only)\n`);
  }
  const password = process.stdin.isTTY ? await askTwice(name) : await readStdin();
  if ([...password].length < MIN_PASSWORD_CHARACTERS) {
    throw new PasswordRefusedError(`the password must have at least ${MIN_PASSWORD_CHARACTERS} characters (it has ${[...password].length}); nothing was written`);
  }
  if (!acceptablePassword(password)) throw new PasswordRefusedError('the password must be at most 72 bytes, without NUL (bcrypt reads no further); nothing was written');
  return print(`${name}:${await hash(password, { cost })}`);
}

async function askTwice(name: string): Promise<string> {
  const stdin = process.stdin as ReadStream;
  const first = await readHidden(`Password for ${name}: `, stdin, process.stderr);
  const second = await readHidden('Again: ', stdin, process.stderr);
  if (first !== second) throw new PasswordRefusedError('the passwords do not match; nothing was written');
  return first;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

function print(text: string): number {
  process.stdout.write(`${text}\n`);
  return 0;
}

/** The package's version: package.json sits two folders up from dist/src/main.js (one from src/main.ts). */
function version(): string {
  for (const up of ['../../package.json', '../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'auth-gateway' && pkg.version) return `auth-gateway ${pkg.version}`;
    } catch {
      // not there; the next
    }
  }
  return 'auth-gateway (version unknown)';
}

/** An error line that says what kind of error it is; a list when there are several problems. */
function report(err: ConfigError | CommandError): void {
  const kind = err instanceof ConfigError ? 'invalid configuration' : err.kind;
  const lines = err.problems.length === 1 && !(err instanceof ConfigError)
    ? [`auth-gateway: ${kind}: ${err.problems[0]}`]
    : [`auth-gateway: ${kind}:`, ...err.problems.map((p) => `  - ${p}`)];
  if (err instanceof UsageError) {
    const spec = COMMANDS.find((c) => c.name === err.command);
    lines.push('', spec ? commandUsage(spec) : usage());
  }
  process.stderr.write(`${lines.join('\n')}\n`);
}


/**
 * A command that is done exits once its output is written: a store client that never connected may
 * still hold a reconnect timer for seconds, and the operator should not wait for it.
 */
function exitWhenWritten(code: number): void {
  let pending = 2;
  const done = () => --pending === 0 && process.exit(code);
  process.stdout.write('', done);
  process.stderr.write('', done);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) exitWhenWritten(code);
  },
  async (err: unknown) => {
    if (err instanceof PromptCancelled) {
      process.stderr.write('auth-gateway: cancelled; nothing was written\n');
      exitWhenWritten(130);
      return;
    }
    if (err instanceof ConfigError || err instanceof CommandError) {
      report(err);
      exitWhenWritten(err instanceof ConfigError ? 2 : err.exitCode);
      return;
    }
    // The gateway failed to start or while running (a port taken…): logged as its last line, exit 1, as
    // with server.workers (2 is for what the operator typed or wrote: a usage or configuration error). A
    // Node system error (with a code) is the operator's to fix and needs no stack; anything else is a
    // defect and keeps it.
    const log = serveLog ?? createLogger('error');
    const e = err as NodeJS.ErrnoException;
    log.error('fatal', { error: err instanceof Error ? (e.code ? e.message : e.stack ?? e.message) : String(err), code: e?.code });
    await exitAfterFlush(log, 1);
  },
);
