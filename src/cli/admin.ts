import { systemClock } from '../clock.js';
import { ConfigError } from '../config/config-error.js';
import { StoreUnreachableError, UsageError } from './command-errors.js';
import type { Config } from '../config/types.js';
import { Lockout } from '../credentials/lockout.js';
import { silentLogger } from '../log.js';
import { createStore } from '../stores/kinds.js';
import { isIP } from 'node:net';
import { RedisCounters } from '../stores/counters/redis-counters.js';
import type { Sessions } from '../stores/sessions/session-store.js';

/**
 * Runs an operator command against the store the gateways share. The memory store lives inside one
 * gateway process, out of reach of another process: those commands need `store.kind: redis`.
 */
async function withSharedStore<T>(config: Config, work: (store: Sessions) => Promise<T>): Promise<T> {
  if (config.store.kind === 'memory') {
    throw new ConfigError([`${config.file || 'the configuration'}: store.kind is memory, which lives inside the gateway process; this command needs the shared store (store.kind: redis)`]);
  }
  const store = createStore(config.store, systemClock, silentLogger);
  try {
    if (!(await store.waitUntilReady(config.store.connectTimeoutMs))) {
      throw new StoreUnreachableError(`the store did not answer within store.connectTimeoutMs (${config.store.connectTimeoutMs} ms); nothing was changed`);
    }
    return await work(store);
  } finally {
    await store.close();
  }
}

/** `sessions list --user NAME`: one line a session, oldest first; never a token or a hash. */
export async function listSessions(config: Config, user: string | undefined): Promise<string> {
  if (!user) throw new UsageError('sessions list needs --user NAME', 'sessions list');
  const sessions = await withSharedStore(config, (store) => store.listSessions(user));
  if (sessions.length === 0) return `no live sessions for user "${user}"`;
  const iso = (ms: number) => new Date(ms).toISOString();
  return [
    `${sessions.length} live session${sessions.length === 1 ? '' : 's'} for user "${user}":`,
    'session id              created                   last refresh',
    ...sessions.map((s) => `${s.sid.padEnd(23)} ${iso(s.createdAtMs)}  ${iso(s.refreshedAtMs)}`),
  ].join('\n');
}

/** `sessions revoke --user NAME`: every session of the user, on every instance, once it answers. */
export async function revokeSessions(config: Config, user: string | undefined): Promise<string> {
  if (!user) throw new UsageError('sessions revoke needs --user NAME', 'sessions revoke');
  const count = await withSharedStore(config, (store) => store.revokeUser(user));
  return `revoked ${count} session${count === 1 ? '' : 's'} of user "${user}"`;
}

export interface LockoutTarget {
  user?: string;
  address?: string;
}

/**
 * What `lockout clear` was told to lift, checked before the configuration is read: no target, or an
 * `--address` that is no IP address, is a usage error (exit 2, then the command's usage).
 */
export function lockoutTarget(user: string | undefined, address: string | undefined): LockoutTarget {
  if (user === undefined && address === undefined) throw new UsageError('lockout clear needs --user NAME, --address IP or both', 'lockout clear');
  if (address !== undefined && isIP(address) === 0) throw new UsageError(`lockout clear --address: "${address}" is not an IPv4 or IPv6 address`, 'lockout clear');
  return { user, address };
}

/** `lockout clear --user NAME | --address IP`: what it lifted, for the operator. */
export async function clearLockout(config: Config, target: LockoutTarget): Promise<string> {
  lockoutTarget(target.user, target.address);
  if (config.store.kind === 'memory') {
    throw new ConfigError([`${config.file || 'the configuration'}: store.kind is memory, which lives inside the gateway process; this command needs the shared store (store.kind: redis)`]);
  }
  const { kind: _kind, ...options } = config.store;
  const counters = new RedisCounters(options, silentLogger);
  try {
    if (!(await counters.waitUntilReady(config.store.connectTimeoutMs + 2000))) {
      throw new StoreUnreachableError(`the store did not answer within ${config.store.connectTimeoutMs + 2000} ms; nothing was changed`);
    }
    await new Lockout(counters, config.lockout, silentLogger).clear(target);
  } finally {
    await counters.close();
  }
  const what = [
    target.user !== undefined ? `every lock of user "${target.user}" (its account lock and its locks from every address)` : '',
    target.address !== undefined ? `the throttle of address ${target.address}` : '',
  ].filter(Boolean).join(' and ');
  return `cleared ${what}`;
}
