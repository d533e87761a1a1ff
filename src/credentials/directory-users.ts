import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { LdapConfig } from '../config/types.js';
import { DomainError } from '../core/domain-error.js';
import type { Logger } from '../log.js';
import { Directory, DirectoryUnavailable, type DirectoryEntry } from './directory.js';
import { UNSAFE_NAME } from './htpasswd.js';
import type { PasswordSource } from './password-check.js';
import { DEFAULT_MAX_PENDING } from './password-verifier.js';
import { VerifiedPasswords } from './verified-passwords.js';
import { traced } from '../tracing/inner.js';

/** A directory password may be longer than bcrypt's 72 bytes, not without end. */
const MAX_DIRECTORY_PASSWORD_BYTES = 1024;
/** A user name longer than this is never looked up. */
const MAX_NAME_LENGTH = 256;
const MAX_GROUP_ENTRIES = 10_000;
/** With cacheSeconds 0 the groups read with a bind still serve the request that made it. */
const MIN_GROUPS_FRESH_MS = 1000;

/**
 * The users of an LDAP directory as a password source (see PasswordCheck: lockout, the address lanes and
 * the cache apply as to any password): a user:password is verified by binding as the user, at most
 * maxPending binds at once (past it, 503 as for bcrypt), and remembered for cacheSeconds as an HMAC, like
 * a verified password. While the directory cannot answer, a remembered password still passes and anything
 * else gets 503 `directory_unavailable`, never a pass and never a 401 (nothing is counted toward lockout).
 * The groups found with a bind are kept per user; a Bearer request of a user whose groups are older than
 * cacheSeconds reads them again (see groupsNow).
 */
export class DirectoryUsers implements PasswordSource {
  readonly directory: Directory;
  /** What tokens of directory users carry as their credential version (see credentialVersion). */
  readonly version: string;
  private readonly memory: VerifiedPasswords;
  private readonly groups = new Map<string, { groups: readonly string[]; readAt: number }>();
  private readonly lookups = new Map<string, Promise<readonly string[]>>();
  private readonly cacheTtlMs: number;
  private down = false;

  constructor(config: LdapConfig, private readonly clock: Clock, private readonly log: Logger, maxPending = DEFAULT_MAX_PENDING) {
    this.directory = new Directory(config, log);
    this.cacheTtlMs = config.cacheSeconds * 1000;
    this.memory = new VerifiedPasswords(clock, this.cacheTtlMs, maxPending);
    // Another directory, or another way to find users in it, is another set of users: their tokens end.
    this.version = `ldap:${createHash('sha256').update(JSON.stringify([config.url, config.userDn, config.searchBase, config.searchFilter])).digest('base64url').slice(0, 16)}`;
  }

  attemptKey(user: string, password: string): string {
    return this.memory.key(user, password);
  }

  isCachedKey(key: string): boolean {
    return this.memory.has(key);
  }

  /** A directory user's attempt key covers the pair only (the directory, not a hash, decides): one epoch. */
  readonly keyEpoch: unknown = {};

  /**
   * Binds as the user. An empty password is refused before any bind (an LDAP bind with a DN and no
   * password is an unauthenticated bind, which a directory may "accept"); so are names no header may
   * carry, names not in their canonical spelling (see canonicalName) and overlong input.
   */
  async verify(user: string, password: string): Promise<boolean> {
    if (!acceptable(user, password)) return false;
    return this.memory.verify(this.memory.key(user, password), () => this.bind(user, password));
  }

  /** Binds and lookups waiting for the directory (a metric). */
  get pendingVerifications(): number {
    return this.memory.pendingChecks;
  }

  /** The groups read with the user's last bind or lookup, however old; undefined: none read on this instance. */
  groupsOf(user: string): readonly string[] | undefined {
    return this.groups.get(user)?.groups;
  }

  /**
   * The user's groups for a request: at once when read within cacheSeconds, else a promise of a fresh
   * read. 401 when the user is gone from the directory; while the directory cannot answer, the groups
   * read before, or 503 `directory_unavailable` when there are none.
   */
  groupsNow(user: string): readonly string[] | Promise<readonly string[]> {
    const known = this.groups.get(user);
    if (known && this.clock.now() - known.readAt < Math.max(this.cacheTtlMs, MIN_GROUPS_FRESH_MS)) return known.groups;
    let lookup = this.lookups.get(user);
    if (!lookup) {
      lookup = this.lookup(user).finally(() => this.lookups.delete(user));
      this.lookups.set(user, lookup);
    }
    return lookup;
  }

  close(): void {
    this.directory.close();
  }

  private async lookup(user: string): Promise<readonly string[]> {
    let entry: DirectoryEntry | undefined;
    try {
      entry = await this.directory.lookup(user);
      this.up();
    } catch (err) {
      if (!(err instanceof DirectoryUnavailable)) throw err;
      this.outage(err);
      const stale = this.groups.get(user);
      if (stale) return stale.groups;
      throw directoryUnavailable();
    }
    if (!entry) {
      this.groups.delete(user);
      throw new DomainError('invalid_token', 'the user is no longer in the directory');
    }
    this.noteGroups(user, entry.groups);
    return entry.groups;
  }

  /** One bind (bounded, with the other checks in progress, by VerifiedPasswords). */
  private async bind(user: string, password: string): Promise<boolean> {
    let entry: DirectoryEntry | undefined;
    try {
      entry = await traced('ldap.bind', { 'auth_gateway.ldap.user': user }, () => this.directory.authenticate(user, password));
      this.up();
    } catch (err) {
      if (!(err instanceof DirectoryUnavailable)) throw err;
      this.outage(err);
      throw directoryUnavailable();
    }
    if (!entry) return false;
    this.noteGroups(user, entry.groups);
    return true;
  }

  private noteGroups(user: string, groups: readonly string[]): void {
    this.groups.delete(user);
    if (this.groups.size >= MAX_GROUP_ENTRIES) this.groups.delete(this.groups.keys().next().value!);
    this.groups.set(user, { groups, readAt: this.clock.now() });
  }

  /** Logged once per outage, and once when it is over. */
  private outage(err: Error): void {
    if (this.down) return;
    this.down = true;
    this.log.error('the directory cannot answer: users verified within users.ldap.cacheSeconds still pass, other directory sign-ins get 503', { error: err.message });
  }

  private up(): void {
    if (!this.down) return;
    this.down = false;
    this.log.info('the directory answers again');
  }
}

function directoryUnavailable(): DomainError {
  return new DomainError('directory_unavailable', 'the user directory cannot answer now; retry shortly', { retryAfterSeconds: 5 });
}

/**
 * A name the directory would match as another spelling of the same name by its spaces (leading,
 * trailing or repeated spaces are insignificant in LDAP matching: ` carol` binds as `carol`) is refused,
 * so one entry does not become several principals (lockout counts, rate limits, allow rules by name).
 */
const SPACED = /^\s|\s$|\s\s/u;

/**
 * The one spelling of a directory user's name the gateway takes: compatibility forms folded (NFKC:
 * fullwidth `ａlice` is `alice`) and lower case. The directory matches names without regard to case and,
 * for most attributes, to such forms (`ALICE` and `ａlice` bind as uid=alice); a principal must have one
 * name per entry, or each spelling would be a user of its own (a lockout budget, rate limits, allow rules
 * by name, the htpasswd file's precedence).
 */
export function canonicalName(user: string): string {
  return user.normalize('NFKC').toLowerCase();
}

/** Whether the name is in its canonical spelling (see canonicalName): only those go to the directory. */
export function isCanonicalName(user: string): boolean {
  return user === canonicalName(user);
}

function acceptable(user: string, password: string): boolean {
  return password !== '' && !password.includes('\0') && Buffer.byteLength(password, 'utf8') <= MAX_DIRECTORY_PASSWORD_BYTES
    && user !== '' && user.length <= MAX_NAME_LENGTH && !UNSAFE_NAME.test(user) && !SPACED.test(user) && isCanonicalName(user);
}
