// CLI entry: `node dist/examples/list-service/main.js`
// Environment: PORT (default 9001), HOST (default 127.0.0.1),
// and optionally RECORDS (default 1000) and SEED (default 42).

import { DEFAULT_RECORDS, DEFAULT_SEED, createListService } from './service.js';

const SHUTDOWN_GRACE_MS = 5000;

function log(level: 'info' | 'error', msg: string, fields: Record<string, unknown> = {}): void {
  const line = JSON.stringify({ time: new Date().toISOString(), level, service: 'list-service', msg, ...fields });
  (level === 'error' ? process.stderr : process.stdout).write(`${line}\n`);
}

function fail(msg: string): never {
  log('error', msg);
  process.exit(1);
}

function intFromEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    fail(`${name} must be an integer from ${min} to ${max}, got '${raw}'`);
  }
  return value;
}

function main(): void {
  const port = intFromEnv('PORT', 9001, 0, 65535);
  const host = process.env.HOST ?? '127.0.0.1';
  const records = intFromEnv('RECORDS', DEFAULT_RECORDS, 0, 1_000_000);
  const seed = intFromEnv('SEED', DEFAULT_SEED, 0, 0xffffffff);
  const server = createListService({ records, seed });

  server.on('error', (error) => fail(`server error: ${error.message}`));
  server.listen(port, host, () => {
    const address = server.address();
    const bound = typeof address === 'object' && address !== null ? address : { address: host, port };
    log('info', 'listening', { host: bound.address, port: bound.port, records, seed });
  });

  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    log('info', 'shutting down', { signal });
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
