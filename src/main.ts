#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { DEFAULT_CONFIG_FILE, loadConfig } from './config/load.js';
import { ConfigError } from './config/errors.js';
import { hash } from './credentials/bcrypt.js';
import { acceptablePassword } from './credentials/password-verifier.js';
import { readHtpasswd } from './credentials/htpasswd.js';
import { loadKeys } from './tokens/keys.js';
import { createLogger } from './log.js';
import { serve } from './run.js';

const USAGE = `usage:
  auth-gateway serve [--config FILE]          run the gateway (default config: ${DEFAULT_CONFIG_FILE})
  auth-gateway config check [--config FILE]   validate a configuration and exit
  auth-gateway users hash NAME [--cost N]     print an htpasswd line; the password is read from stdin`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { config: { type: 'string', short: 'c', default: DEFAULT_CONFIG_FILE }, cost: { type: 'string', default: '10' }, help: { type: 'boolean', short: 'h' } },
  });
  const [command, sub, name] = positionals;
  if (values.help || !command) return usage(values.help ? 0 : 2);
  if (command === 'serve') {
    await serve(loadConfig(values.config));
    return -1;
  }
  if (command === 'config' && sub === 'check') return checkConfig(values.config);
  if (command === 'users' && sub === 'hash' && name) return hashUser(name, Number(values.cost));
  return usage(2);
}

function checkConfig(file: string): number {
  const config = loadConfig(file);
  loadKeys(config.tokens);
  const users = readHtpasswd(config.users.htpasswd).size;
  process.stdout.write(`${config.file}: ok (${config.routes.length} routes, ${Object.keys(config.upstreams).length} upstreams, ${users} users, store ${config.store.kind})\n`);
  return 0;
}

async function hashUser(name: string, cost: number): Promise<number> {
  if (name.includes(':')) throw new ConfigError(['a user name must not contain ":"']);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const password = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
  if (!password || !acceptablePassword(password)) throw new ConfigError(['the password must be 1 to 72 bytes without NUL']);
  process.stdout.write(`${name}:${await hash(password, { cost })}\n`);
  return 0;
}

function usage(code: number): number {
  (code === 0 ? process.stdout : process.stderr).write(USAGE + '\n');
  return code;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`auth-gateway: ${err.message}\n`);
    } else {
      createLogger('error').error('fatal', { error: err instanceof Error ? err.stack ?? err.message : String(err) });
    }
    process.exitCode = 2;
  },
);
