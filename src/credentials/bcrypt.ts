import bcrypt from 'bcrypt';
import { traced } from '../tracing/inner.js';

/**
 * The one door to bcrypt (the native `bcrypt` package: prebuilt binaries, work on the libuv thread
 * pool, never on the event loop). Swapping the implementation touches this file only.
 */

/** Checks a password against a `$2a$`/`$2b$`/`$2y$` hash off the event loop. */
export function verify(password: string, hash: string): Promise<boolean> {
  return traced('bcrypt.compare', {}, () => bcrypt.compare(password, canonicalPrefix(hash)));
}

export function hash(password: string, options: { cost: number }): Promise<string> {
  return bcrypt.hash(password, options.cost);
}

/** Blocks: for start-up (the dummy hash) and tests only. */
export function hashSync(password: string, options: { cost: number }): string {
  return bcrypt.hashSync(password, options.cost);
}

export function costOf(hash: string): number {
  return bcrypt.getRounds(canonicalPrefix(hash));
}

/** `$2y$` is PHP's (and htpasswd's) name for the same algorithm as `$2b$`, which is all the binding reads. */
function canonicalPrefix(hash: string): string {
  return hash.startsWith('$2y$') ? `$2b$${hash.slice(4)}` : hash;
}
