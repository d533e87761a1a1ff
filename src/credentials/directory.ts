import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import {
  Client, ConstraintViolationError, InappropriateAuthError, InvalidCredentialsError, InvalidDNSyntaxError, NoSuchObjectError,
  ResultCodeError, SizeLimitExceededError, UnwillingToPerformError, type Entry,
} from 'ldapts';
import { ConfigError } from '../config/config-error.js';
import type { LdapConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { escapeDnValue, escapeFilterValue, fill } from './ldap-escape.js';

/** How long a connection may take to open, and any one operation (bind, search, StartTLS) to answer. */
const DIRECTORY_CONNECT_TIMEOUT_MS = 3000;
const DIRECTORY_TIMEOUT_MS = 5000;

/** The directory could not answer (down, unreachable, too slow, TLS refused, the service bind refused). */
export class DirectoryUnavailable extends Error {}

/** A user the directory knows: its DN and the names (cn) of its groups, sorted. */
export interface DirectoryEntry {
  dn: string;
  groups: readonly string[];
}

/** What a group name may not hold: it travels in headers as a list entry and must be writable in an allow rule. */
// eslint-disable-next-line no-control-regex
const UNSAFE_GROUP = /[\u0000-\u001f\u007f-\u009f\s,:]/u;

/**
 * The LDAP side of users.ldap (ldapts): a user is verified by binding as them on a connection of its own,
 * opened for that bind and closed after; searches (the user's entry, groups) go over one long-lived service
 * connection, bound as `bindDn` (or anonymous), shared by every request (LDAP answers many operations on
 * one connection) and opened again when it dropped. Every connection is TLS from the first byte (ldaps)
 * or upgraded with StartTLS before anything else is sent, checked against `caFile`.
 */
export class Directory {
  private service: Promise<Client> | undefined;
  private readonly tls: ConnectionOptions | undefined;

  constructor(private readonly config: LdapConfig, private readonly log: Logger) {
    const ca = config.caFile === undefined ? undefined : readCa(config.caFile);
    this.tls = config.url.startsWith('ldaps:') || config.startTls ? { minVersion: 'TLSv1.2', ...(ca ? { ca } : {}) } : undefined;
  }

  /**
   * Binds as the user with the password: its entry and groups when the directory accepts the bind,
   * undefined when it refuses it (wrong password, no such entry, a name the search does not find exactly
   * once). Throws DirectoryUnavailable when it cannot tell.
   */
  async authenticate(user: string, password: string): Promise<DirectoryEntry | undefined> {
    const dn = await this.dnOf(user);
    if (dn === undefined) return undefined;
    const client = await this.connect();
    try {
      try {
        await client.bind(dn, password);
      } catch (err) {
        if (isRefusal(err)) return undefined;
        throw unavailable(err);
      }
      // Without a service account the user's own bind reads its groups.
      const groups = await this.groupsOf(this.config.bindDn === undefined ? client : undefined, dn, user);
      return { dn, groups };
    } finally {
      void client.unbind().catch(() => {});
    }
  }

  /**
   * A user verified before (a Bearer request): its entry and groups as the directory has them now, read
   * with the service account; undefined when the entry is gone. Without a service account it cannot be
   * read: undefined is never answered then, only the groups an anonymous search finds.
   */
  async lookup(user: string): Promise<DirectoryEntry | undefined> {
    const dn = await this.dnOf(user);
    if (dn === undefined) return undefined;
    if (this.config.userDn !== undefined && this.config.bindDn !== undefined) {
      const found = await this.search(undefined, dn, '(objectClass=*)', ['1.1'], 1, 'base');
      if (found.length === 0) return undefined;
    }
    return { dn, groups: await this.groupsOf(undefined, dn, user) };
  }

  /** `config check --connect`: the service bind, or an anonymous read of the root DSE; a line for the report. */
  async check(): Promise<string> {
    const started = Date.now();
    const client = await this.connect();
    try {
      if (this.config.bindDn !== undefined) {
        try {
          await client.bind(this.config.bindDn, this.config.bindPassword ?? '');
        } catch (err) {
          throw unavailable(err, isRefusal(err) ? `the service bind as ${this.config.bindDn} was refused` : undefined);
        }
        return `bound as ${this.config.bindDn}${this.tls ? ' over TLS' : ''} in ${Date.now() - started} ms`;
      }
      try {
        await client.search('', { scope: 'base', filter: '(objectClass=*)', attributes: ['namingContexts'] });
      } catch (err) {
        throw unavailable(err);
      }
      return `answered an anonymous read of the root DSE${this.tls ? ' over TLS' : ''} in ${Date.now() - started} ms`;
    } finally {
      void client.unbind().catch(() => {});
    }
  }

  close(): void {
    const service = this.service;
    this.service = undefined;
    void service?.then((c) => c.unbind()).catch(() => {});
  }

  /** The user's DN: the template filled in, or the one entry the search finds. */
  private async dnOf(user: string): Promise<string | undefined> {
    if (this.config.userDn !== undefined) return fill(this.config.userDn, { user: escapeDnValue(user) });
    const filter = fill(this.config.searchFilter!, { user: escapeFilterValue(user) });
    let found: Entry[];
    try {
      found = await this.search(undefined, this.config.searchBase!, filter, ['1.1'], 2, 'sub');
    } catch (err) {
      // More entries than the two asked for: as ambiguous as two.
      if (!(err instanceof SizeLimitExceededError)) throw err;
      found = [];
      this.log.warn('a directory search found more than one entry for a user name; the name is refused', { user: user.slice(0, 128), filter: this.config.searchFilter });
    }
    if (found.length > 1) this.log.warn('a directory search found more than one entry for a user name; the name is refused', { user: user.slice(0, 128), filter: this.config.searchFilter });
    return found.length === 1 ? found[0]!.dn : undefined;
  }

  /** The cn of every group groupsFilter finds (names unfit for headers and allow rules left out), sorted. */
  private async groupsOf(client: Client | undefined, dn: string, user: string): Promise<readonly string[]> {
    if (this.config.groupsBase === undefined) return [];
    const filter = fill(this.config.groupsFilter, { dn: escapeFilterValue(dn), user: escapeFilterValue(user) });
    const entries = await this.search(client, this.config.groupsBase, filter, ['cn'], 0, 'sub');
    const names = new Set<string>();
    for (const entry of entries) {
      const cn = first(entry.cn);
      if (cn === undefined) continue;
      if (cn === '' || UNSAFE_GROUP.test(cn)) {
        this.log.warn('a directory group whose name holds spaces, commas, colons or control characters is left out', { group: entry.dn });
        continue;
      }
      names.add(cn);
    }
    return Object.freeze([...names].sort());
  }

  /**
   * A search on `client`, or on the service connection (opened again, once, when it had dropped: the
   * directory restarted since). No such base: no entries.
   */
  private async search(client: Client | undefined, base: string, filter: string, attributes: string[], sizeLimit: number, scope: 'base' | 'sub'): Promise<Entry[]> {
    for (let attempt = 0; ; attempt++) {
      const on = client ?? (await this.serviceClient());
      try {
        return (await on.search(base, { scope, filter, attributes, sizeLimit })).searchEntries;
      } catch (err) {
        if (err instanceof NoSuchObjectError) return [];
        if (err instanceof SizeLimitExceededError && sizeLimit > 0) throw err;
        if (client === undefined && !(err instanceof ResultCodeError)) {
          // The connection broke (not an LDAP answer): drop it; the next search opens a new one.
          this.dropService(on);
          if (attempt === 0) continue;
        }
        throw unavailable(err);
      }
    }
  }

  private serviceClient(): Promise<Client> {
    const current = this.service;
    if (current) {
      return current.then((c) => {
        if (c.isConnected) return c;
        // Dropped while idle (a directory restart): ldapts would reconnect unbound and without StartTLS.
        this.dropService(c);
        return this.serviceClient();
      });
    }
    const opening = this.openService();
    this.service = opening;
    opening.catch(() => {
      if (this.service === opening) this.service = undefined;
    });
    return opening;
  }

  private async openService(): Promise<Client> {
    const client = await this.connect();
    if (this.config.bindDn !== undefined) {
      try {
        await client.bind(this.config.bindDn, this.config.bindPassword ?? '');
      } catch (err) {
        void client.unbind().catch(() => {});
        if (isRefusal(err)) this.log.error('the directory refused the service bind (users.ldap.bindDn, bindPassword)', { bindDn: this.config.bindDn, error: (err as Error).message });
        throw unavailable(err, isRefusal(err) ? 'the service bind was refused' : undefined);
      }
    }
    return client;
  }

  private dropService(client: Client): void {
    if (this.service === undefined) return;
    const dropping = this.service;
    void dropping.then((c) => {
      if (c !== client) return;
      if (this.service === dropping) this.service = undefined;
      void c.unbind().catch(() => {});
    }, () => {});
  }

  /** A new connection, TLS already in place (ldaps, or StartTLS done). */
  private async connect(): Promise<Client> {
    const client = new Client({
      url: this.config.url,
      timeout: DIRECTORY_TIMEOUT_MS,
      connectTimeout: DIRECTORY_CONNECT_TIMEOUT_MS,
      tlsOptions: this.config.url.startsWith('ldaps:') ? this.tls : undefined,
      strictDN: false,
    });
    if (this.config.startTls) {
      try {
        await client.startTLS(this.tls);
      } catch (err) {
        void client.unbind().catch(() => {});
        throw unavailable(err, 'StartTLS failed');
      }
    }
    return client;
  }
}

/** The directory's answer to a bind that says no about the credentials (rather than about itself). */
function isRefusal(err: unknown): boolean {
  return err instanceof InvalidCredentialsError || err instanceof NoSuchObjectError || err instanceof InvalidDNSyntaxError
    || err instanceof InappropriateAuthError || err instanceof UnwillingToPerformError || err instanceof ConstraintViolationError;
}

function unavailable(err: unknown, what?: string): DirectoryUnavailable {
  if (err instanceof DirectoryUnavailable) return err;
  const e = err as { code?: string; message?: string };
  const cause = e.code ?? e.message ?? String(err);
  return new DirectoryUnavailable(what ? `${what}: ${cause}` : cause);
}

function first(value: Entry[string] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v === undefined ? undefined : Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
}

function readCa(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError([`users.ldap.caFile: ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
}
