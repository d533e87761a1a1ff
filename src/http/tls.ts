import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { createSecureContext, DEFAULT_CIPHERS, type TlsOptions, type TLSSocket } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { ConfigError } from '../config/config-error.js';
import type { FileCheck } from '../config/inspection.js';
import type { TlsConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { PROBLEM_CONTENT_TYPE, problemBody } from './problem.js';
import { revokedIds } from '../auth/peer-certificates.js';

/** The oldest protocol the public port speaks. */
const MIN_TLS_VERSION = 'TLSv1.2';
/**
 * The suites offered. TLS 1.2: forward-secret ECDHE with an AEAD only (AES-GCM, ChaCha20-Poly1305),
 * for ECDSA and RSA certificates alike; Node's default list also offers CBC suites with SHA-1 and
 * SHA-2 MACs and finite-field DHE. TLS 1.3: Node's own suites (all AEAD), as Node orders them.
 */
const TLS_CIPHERS = [
  ...DEFAULT_CIPHERS.split(':').filter((c) => c.startsWith('TLS_')),
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');
/** A certificate and a key written one after the other are read once both are there. */
const SETTLE_MS = 200;

/**
 * The options of an HTTPS server for server.tls, read and checked now: both files readable, PEM, and
 * the key belonging to the certificate (createSecureContext refuses a mismatched pair); with clientCa,
 * the client CAs and the CRLs (which OpenSSL then checks every client certificate against). Throws a
 * ConfigError naming server.tls.
 */
export function readTlsOptions(tls: TlsConfig): TlsOptions {
  const read = (key: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new ConfigError([`server.tls.${key}: ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
    }
  };
  const options: TlsOptions = {
    cert: read('certFile', tls.certFile),
    key: read('keyFile', tls.keyFile),
    minVersion: MIN_TLS_VERSION,
    ciphers: TLS_CIPHERS,
    honorCipherOrder: true,
  };
  try {
    createSecureContext(options);
  } catch (err) {
    throw new ConfigError([`server.tls: ${tls.certFile} and ${tls.keyFile} are not a usable certificate and key: ${(err as Error).message}`]);
  }
  if (tls.clientCa !== undefined) Object.assign(options, clientCertificateOptions(tls, read));
  return options;
}

/**
 * Client certificates: the CAs they must chain to and the CRLs, checked by OpenSSL at the handshake.
 * `require`: a handshake without a certificate that verifies fails. `request`: the certificate is asked
 * for, the handshake completes either way, and the verdict (`socket.authorized`) is judged per request
 * (ClientCertificates): one that does not verify is never an identity.
 */
function clientCertificateOptions(tls: TlsConfig, read: (key: string, file: string) => Buffer): TlsOptions {
  const options: TlsOptions = {
    ca: read('clientCa', tls.clientCa!),
    requestCert: true,
    rejectUnauthorized: tls.clientCerts === 'require',
  };
  if (tls.crlFile !== undefined) {
    options.crl = read('crlFile', tls.crlFile);
    try {
      revokedIds(options.crl as Buffer);
    } catch (err) {
      throw new ConfigError([`server.tls.crlFile: ${tls.crlFile} is not a PEM CRL: ${(err as Error).message}`]);
    }
  }
  try {
    createSecureContext(options);
  } catch (err) {
    throw new ConfigError([`server.tls: ${tls.clientCa} or ${tls.crlFile ?? 'the CRL'} cannot be used: ${(err as Error).message}`]);
  }
  return options;
}

/**
 * A listener that asks for client certificates: no TLS 1.2 renegotiation (the certificate a connection
 * was judged by, and cached with, is the one it keeps).
 */
export function keepClientCertificates(server: HttpsServer): void {
  server.on('secureConnection', (socket: TLSSocket) => socket.disableRenegotiation());
}

/** When the certificate expires (for the log), or undefined when it cannot be read. */
function certificateExpiry(cert: TlsOptions['cert']): string | undefined {
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
 * and the one in use stays. The client CA and CRL files are watched alike; `reloaded` is called with the
 * options taken (the CRL for the connections already open), `failing` with whether a reload failed (the
 * metric). Returns a function that stops watching.
 */
export function watchCertificate(server: HttpsServer, tls: TlsConfig, log: Logger, reloaded: (options: TlsOptions) => void = () => {}, failing: (failed: boolean) => void = () => {}): () => void {
  let settle: NodeJS.Timeout | undefined;
  const reload = () => {
    try {
      const options = readTlsOptions(tls);
      server.setSecureContext(options);
      reloaded(options);
      failing(false);
      log.info('tls certificate reloaded', { certFile: tls.certFile, validTo: certificateExpiry(options.cert), clientCa: tls.clientCa, crlFile: tls.crlFile });
    } catch (err) {
      failing(true);
      log.error('tls certificate not reloaded; keeping the one in use', { error: err instanceof ConfigError ? err.problems.join('; ') : String(err) });
    }
  };
  const changed = (now: { mtimeMs: number; ino: number; size: number }, before: { mtimeMs: number; ino: number; size: number }) => {
    if (now.mtimeMs === before.mtimeMs && now.ino === before.ino && now.size === before.size) return;
    clearTimeout(settle);
    settle = setTimeout(reload, SETTLE_MS);
  };
  const options = { interval: tls.reloadIntervalMs, persistent: false };
  const files = [tls.certFile, tls.keyFile, tls.clientCa, tls.crlFile].filter((f): f is string => f !== undefined);
  for (const file of files) watchFile(file, options, changed);
  return () => {
    clearTimeout(settle);
    for (const file of files) unwatchFile(file, changed);
  };
}

/** A TLS connection opens with a handshake record (0x16); an HTTP/1 request with its method, in capitals. */
const HTTP_METHOD_START = /^[A-Z]/;
/** How long the answer to a plain HTTP request may take to leave before the connection is cut. */
const PLAIN_ANSWER_MS = 2000;

/**
 * Plain HTTP sent to the HTTPS port is answered, in plain HTTP, with a 400 problem saying so (as nginx
 * answers "The plain HTTP request was sent to HTTPS port"), instead of a connection closed without a
 * word. The first bytes of each connection are looked at and put back; a TLS client goes on to the
 * server's own TLS handling with them. A connection that sends nothing is closed after `firstByteMs`
 * (the headers timeout), as it would be anyway. Call once, right after creating the server.
 */
export function answerPlainHttp(server: HttpsServer, firstByteMs: number): void {
  const tlsListeners = server.listeners('connection') as Array<(socket: Socket) => void>;
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const ignore = () => {};
    const timer = setTimeout(() => socket.destroy(), firstByteMs);
    socket.on('error', ignore);
    socket.once('close', () => clearTimeout(timer));
    socket.once('data', (first: Buffer) => {
      clearTimeout(timer);
      socket.pause();
      if (HTTP_METHOD_START.test(first.toString('latin1', 0, 1))) return answerPlain(socket);
      socket.unshift(first);
      socket.off('error', ignore);
      for (const listener of tlsListeners) listener.call(server, socket);
    });
  });
}

function answerPlain(socket: Socket): void {
  const body = JSON.stringify(problemBody(400, 'invalid_request', 'The plain HTTP request was sent to HTTPS port: use https://'));
  // The rest of the request is read and dropped, so closing does not reset the connection under the answer.
  socket.resume();
  socket.end([
    'HTTP/1.1 400 Bad Request',
    `Content-Type: ${PROBLEM_CONTENT_TYPE}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n'));
  setTimeout(() => socket.destroy(), PLAIN_ANSWER_MS).unref();
}

/** The TLS certificate and key, at load time. */
export const tlsCheck: FileCheck = {
  keys: ['server.tls'],
  applies: (config) => Boolean(config.server.tls?.certFile && config.server.tls.keyFile),
  run: (config) => void readTlsOptions(config.server.tls!),
};
