/**
 * A command's failure that is not about the configuration file (that one is ConfigError). `kind` starts
 * the error line, so the operator sees at once what went wrong: `usage error`, `store unreachable`,
 * `connection check failed`, `password refused`.
 */
export class CommandError extends Error {
  constructor(readonly kind: string, readonly problems: string[], readonly exitCode: number) {
    super(`${kind}: ${problems.join('; ')}`);
    this.name = 'CommandError';
  }
}

/** What was typed is not a command line this program takes: one line, then the usage; exit 2. */
export class UsageError extends CommandError {
  /** The command whose usage to show (`sessions list`); undefined: the whole usage. */
  constructor(message: string, readonly command?: string) {
    super('usage error', [message], 2);
    this.name = 'UsageError';
  }
}

/** The shared store did not answer: nothing was done; exit 1 (try again, or check the store). */
export class StoreUnreachableError extends CommandError {
  constructor(message: string) {
    super('store unreachable', [message], 1);
    this.name = 'StoreUnreachableError';
  }
}

/** `config check --connect`: the file is fine, the store or an upstream did not answer; exit 2. */
export class ConnectionCheckError extends CommandError {
  constructor(problems: string[]) {
    super('connection check failed', problems, 2);
    this.name = 'ConnectionCheckError';
  }
}

/**
 * The configuration is fine, but what the command names cannot be acted on: `keys revoke` of a key the
 * store does not have (`no such key`), `users add` of a name that is in the users file (`users-file
 * name`), `users import` of a file it cannot take (`import refused`). `kind` says which; exit 2, as for
 * any input the operator can correct.
 */
export class InputError extends CommandError {
  constructor(kind: string, problems: string | string[]) {
    super(kind, typeof problems === 'string' ? [problems] : problems, 2);
    this.name = 'InputError';
  }
}

/** `users hash`: the password typed cannot be used (too short, too long, the two do not match); exit 2. */
export class PasswordRefusedError extends CommandError {
  constructor(message: string) {
    super('password refused', [message], 2);
    this.name = 'PasswordRefusedError';
  }
}
