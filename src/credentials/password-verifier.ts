import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import { costOf as hashCost, hashSync, verify } from './bcrypt.js';
import { VerifiedPasswords } from './verified-passwords.js';

/** bcrypt reads only the first 72 bytes: a longer password is refused, never silently truncated. */
const MAX_PASSWORD_BYTES = 72;
export const DEFAULT_MAX_PENDING = 64;

/**
 * Checks user:password against bcrypt hashes off the event loop (the native thread pool), and keeps
 * successes for a short time so steady Basic traffic costs no bcrypt (VerifiedPasswords). The key of a
 * success covers the stored hash, so a changed password invalidates its entry by itself, and it never
 * holds a password.
 */
export class PasswordVerifier {
  private readonly memory: VerifiedPasswords;
  private users: Map<string, string>;
  /** user -> a fingerprint of its current hash: tokens carry it, so they die with a changed password. */
  private versions: Map<string, string>;
  private dummyHash: string;
  /** Replaced with the user table: attempt keys made before are keys of another table (see keyEpoch). */
  private epoch: object = {};

  constructor(users: Map<string, string>, cacheTtlMs: number, clock: Clock, maxPending = DEFAULT_MAX_PENDING) {
    this.memory = new VerifiedPasswords(clock, cacheTtlMs, maxPending);
    this.users = users;
    this.versions = versionsOf(users);
    this.dummyHash = dummyHashFor(users);
  }

  /** Swaps in a new user table (the htpasswd file changed) and drops every cached success. */
  replaceUsers(users: Map<string, string>): string[] {
    const ended = endedUsers(this.users, users);
    this.users = users;
    this.versions = versionsOf(users);
    if (costOfUsers(users) !== hashCost(this.dummyHash)) this.dummyHash = dummyHashFor(users);
    this.memory.clear();
    this.epoch = {};
    return ended;
  }

  /** Changes with the user table: an attempt key covers the user's stored hash (see attemptKey). */
  get keyEpoch(): unknown {
    return this.epoch;
  }

  /** The users of the file and their hash lines, as read. */
  get table(): ReadonlyMap<string, string> {
    return this.users;
  }

  /** The user's credential version; undefined once the user is gone from the file. */
  credentialVersion(user: string): string | undefined {
    return this.versions.get(user);
  }

  /** bcrypt checks waiting for or running on the thread pool (a metric). */
  get pendingVerifications(): number {
    return this.memory.pendingChecks;
  }

  get userCount(): number {
    return this.users.size;
  }

  /** True when this exact user:password was verified within the cache TTL; costs one SHA-256. */
  isCached(user: string, password: string): boolean {
    return this.users.has(user) && this.isCachedKey(this.attemptKey(user, password));
  }

  /**
   * What identifies this user:password against the file in force: the key over the user, the password
   * and the stored hash (an unknown user's over the dummy hash). Identical attempts have the same key, so
   * they can wait for one check; the key holds no password.
   */
  attemptKey(user: string, password: string): string {
    return this.memory.key(user, password, this.users.get(user) ?? this.dummyHash);
  }

  /** True when the attempt with this key (see attemptKey) was verified within the cache TTL. */
  isCachedKey(key: string): boolean {
    return this.memory.has(key);
  }

  /**
   * Unknown users cost the same bcrypt as wrong passwords (a dummy hash of the same cost). Past
   * maxPending bcrypt checks waiting for the thread pool, 503: a flood of guesses from many addresses
   * must not queue unbounded work (and memory, and latency) behind it.
   */
  async verify(user: string, password: string): Promise<boolean> {
    if (!acceptablePassword(password)) return false;
    const hash = this.users.get(user);
    if (hash === undefined) {
      const dummy = this.dummyHash;
      await this.memory.bounded(() => verify(password, dummy));
      return false;
    }
    return this.memory.verify(this.memory.key(user, password, hash), () => verify(password, hash));
  }
}

/** Users whose line is gone or changed from `before` to `after`: their sessions must end. */
export function endedUsers(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): string[] {
  const ended: string[] = [];
  for (const [user, hash] of before) if (after.get(user) !== hash) ended.push(user);
  return ended;
}

export function acceptablePassword(password: string): boolean {
  return Buffer.byteLength(password, 'utf8') <= MAX_PASSWORD_BYTES && !password.includes('\0');
}

function versionsOf(users: Map<string, string>): Map<string, string> {
  const versions = new Map<string, string>();
  for (const [user, hash] of users) versions.set(user, createHash('sha256').update(hash).digest('base64url').slice(0, 16));
  return versions;
}

/** A hash of a random password at the cost the real users have, so a miss costs what a hit costs. */
function dummyHashFor(users: Map<string, string>): string {
  return hashSync(randomBytes(16).toString('base64url'), { cost: costOfUsers(users) });
}

/** The highest cost in the file: an unknown user never answers faster than any real one. */
function costOfUsers(users: Map<string, string>): number {
  let cost = 0;
  for (const hash of users.values()) cost = Math.max(cost, hashCost(hash));
  return cost || 10;
}
