import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { Server as HttpsServer } from 'node:https';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { ConfigError } from '../config/errors.js';
import type { TlsConfig } from '../config/types.js';
import type { Logger } from '../log.js';

/** The oldest protocol the public port speaks. */
const MIN_TLS_VERSION = 'TLSv1.2';
/** A certificate and a key written one after the other are read once both are there. */
const SETTLE_MS = 200;

/**
 * The options of an HTTPS server for server.tls, read and checked now: both files readable, PEM, and
 * the key belonging to the certificate (createSecureContext refuses a mismatched pair). Throws a
 * ConfigError naming server.tls.
 */
export function readTlsOptions(tls: TlsConfig): SecureContextOptions {
  const read = (key: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new ConfigError([`server.tls.${key}: ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
    }
  };
  const options: SecureContextOptions = { cert: read('certFile', tls.certFile), key: read('keyFile', tls.keyFile), minVersion: MIN_TLS_VERSION };
  try {
    createSecureContext(options);
  } catch (err) {
    throw new ConfigError([`server.tls: ${tls.certFile} and ${tls.keyFile} are not a usable certificate and key: ${(err as Error).message}`]);
  }
  return options;
}

/** When the certificate expires (for the log), or undefined when it cannot be read. */
export function certificateExpiry(cert: SecureContextOptions['cert']): string | undefined {
  try {
    return new X509Certificate(cert as Buffer).validTo;
  } catch {
    return undefined;
  }
}

/**
 * Picks up renewed certificate files without a restart: both files are polled (stat, so a replaced
 * file or a swapped symlink, as certificate managers and mounted secrets do it, is seen too), and on a
 * change the pair is read and checked again; connections from then on get it. A broken pair is logged
 * and the one in use stays. Returns a function that stops watching.
 */
export function watchCertificate(server: HttpsServer, tls: TlsConfig, log: Logger): () => void {
  let settle: NodeJS.Timeout | undefined;
  const reload = () => {
    try {
      const options = readTlsOptions(tls);
      server.setSecureContext(options);
      log.info('tls certificate reloaded', { certFile: tls.certFile, validTo: certificateExpiry(options.cert) });
    } catch (err) {
      log.error('tls certificate not reloaded; keeping the one in use', { error: err instanceof ConfigError ? err.problems.join('; ') : String(err) });
    }
  };
  const changed = (now: { mtimeMs: number; ino: number; size: number }, before: { mtimeMs: number; ino: number; size: number }) => {
    if (now.mtimeMs === before.mtimeMs && now.ino === before.ino && now.size === before.size) return;
    clearTimeout(settle);
    settle = setTimeout(reload, SETTLE_MS);
  };
  const options = { interval: tls.reloadIntervalMs, persistent: false };
  watchFile(tls.certFile, options, changed);
  watchFile(tls.keyFile, options, changed);
  return () => {
    clearTimeout(settle);
    unwatchFile(tls.certFile, changed);
    unwatchFile(tls.keyFile, changed);
  };
}
