#!/usr/bin/env node
import { parseArgs } from 'node:util';
import type { ReadStream } from 'node:tty';
import { clearLockout, listSessions, revokeSessions } from './cli/admin.js';
import { checkConnections } from './cli/connect.js';
import { PromptCancelled, readHidden } from './cli/prompt.js';
import { DEFAULT_CONFIG_FILE } from './config/load.js';
import { inspectConfig } from './config/inspect.js';
import type { Config } from './config/types.js';
import { ConfigError } from './config/errors.js';
import { hash } from './credentials/bcrypt.js';
import { acceptablePassword } from './credentials/password-verifier.js';
import { createLogger, exitAfterFlush, type Logger } from './log.js';
import { serve } from './run.js';

const USAGE = `usage:
  auth-gateway serve [--config FILE] [--watch]          run the gateway (default config: ${DEFAULT_CONFIG_FILE});
                                                        SIGHUP reloads the configuration, --watch also on a change
  auth-gateway config check [--config FILE] [--connect] validate a configuration (and the files it names) and exit;
                                                        --connect: also check that the store and each upstream answer
  auth-gateway users hash NAME [--cost N]               print an htpasswd line; on a terminal the password is asked
                                                        for twice without echo, otherwise read from stdin
  auth-gateway sessions list --user NAME [--config FILE] list a user's live sessions (id, created, last refresh)
  auth-gateway sessions revoke --user NAME [--config FILE]
                                                        end every session of a user on every instance
  auth-gateway lockout clear [--user NAME] [--address IP] [--config FILE]
                                                        lift a brute-force lock in the shared store: the account lock
                                                        of a user, the throttle of an address, or (both) their pair`;

/** The running gateway's logger: a fatal error is logged in the same ordered stream. */
let serveLog: Logger | undefined;

/** Below this, bcrypt is cheap enough to guess at offline from a leaked file (OWASP: at least 10). */
const MIN_RECOMMENDED_COST = 10;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c', default: DEFAULT_CONFIG_FILE },
      cost: { type: 'string', default: String(MIN_RECOMMENDED_COST) },
      connect: { type: 'boolean' },
      watch: { type: 'boolean' },
      user: { type: 'string' },
      address: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, sub, name] = positionals;
  if (values.help || !command) return usage(values.help ? 0 : 2);
  if (command === 'serve') {
    const config = loadChecked(values.config);
    serveLog = createLogger(config.log.level);
    await serve(config, serveLog, { watch: values.watch === true });
    return -1;
  }
  if (command === 'config' && sub === 'check') return checkConfig(values.config, values.connect === true);
  if (command === 'users' && sub === 'hash' && name) return hashUser(name, values.cost);
  if (command === 'sessions' && (sub === 'list' || sub === 'revoke')) {
    const config = loadChecked(values.config);
    process.stdout.write(`${await (sub === 'list' ? listSessions(config, values.user) : revokeSessions(config, values.user))}\n`);
    return 0;
  }
  if (command === 'lockout' && sub === 'clear') {
    process.stdout.write(`${await clearLockout(loadChecked(values.config), { user: values.user, address: values.address })}\n`);
    return 0;
  }
  return usage(2);
}

/** The configuration, refused with every problem at once (files it names included). */
function loadChecked(file: string): Config {
  const { config, problems } = inspectConfig(file);
  if (!config || problems.length > 0) throw new ConfigError(problems);
  return config;
}

async function checkConfig(file: string, connect: boolean): Promise<number> {
  const { config, problems, users } = inspectConfig(file);
  if (config && connect) {
    for (const r of await checkConnections(config)) {
      if (r.ok) process.stdout.write(`${r.what}: ${r.detail}\n`);
      else problems.push(`${r.what} ${r.detail}`);
    }
  }
  if (!config || problems.length > 0) throw new ConfigError(problems);
  process.stdout.write(`${config.file}: ok (${config.routes.length} routes, ${Object.keys(config.upstreams).length} upstreams, ${users ?? 0} users, store ${config.store.kind})\n`);
  return 0;
}

async function hashUser(name: string, costText: string): Promise<number> {
  if (name.includes(':')) throw new ConfigError(['a user name must not contain ":"']);
  const cost = /^\d+$/.test(costText) ? Number(costText) : NaN;
  if (!(cost >= 4 && cost <= 31)) throw new ConfigError(['--cost must be an integer from 4 to 31']);
  if (cost < MIN_RECOMMENDED_COST) {
    process.stderr.write(`auth-gateway: warning: bcrypt cost ${cost} is below ${MIN_RECOMMENDED_COST}; a leaked hash is that much cheaper to crack (use it for tests only)\n`);
  }
  const password = process.stdin.isTTY ? await askTwice(name) : await readStdin();
  if (!password || !acceptablePassword(password)) throw new ConfigError(['the password must be 1 to 72 bytes without NUL']);
  process.stdout.write(`${name}:${await hash(password, { cost })}\n`);
  return 0;
}

async function askTwice(name: string): Promise<string> {
  const stdin = process.stdin as ReadStream;
  const first = await readHidden(`Password for ${name}: `, stdin, process.stderr);
  const second = await readHidden('Again: ', stdin, process.stderr);
  if (first !== second) throw new ConfigError(['the passwords do not match; nothing was written']);
  return first;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

function usage(code: number): number {
  (code === 0 ? process.stdout : process.stderr).write(USAGE + '\n');
  return code;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  async (err: unknown) => {
    if (err instanceof PromptCancelled) {
      process.exitCode = 130;
      return;
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`auth-gateway: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    // Exit explicitly: a gateway that failed half-way (a port taken) may hold sockets and timers open.
    const log = serveLog ?? createLogger('error');
    log.error('fatal', { error: err instanceof Error ? err.stack ?? err.message : String(err) });
    await exitAfterFlush(log, 2);
  },
);
