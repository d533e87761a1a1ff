import { Redis } from 'ioredis';
import type { Config } from '../config/types.js';

export interface ConnectResult {
  /** What was tried, e.g. `store redis://127.0.0.1:6379` or `upstream contacts http://…`. */
  what: string;
  ok: boolean;
  detail: string;
}

/** The longest any one check waits: an upstream's own connect timeout, at most this. */
const MAX_WAIT_MS = 5000;

/** `config check --connect`: does the store answer PING, does each upstream answer HTTP? All at once. */
export function checkConnections(config: Config): Promise<ConnectResult[]> {
  const checks: Array<Promise<ConnectResult>> = [checkStore(config)];
  for (const [name, u] of Object.entries(config.upstreams)) {
    for (const url of u.targets) if (url) checks.push(checkUpstream(name, url, Math.min(u.timeouts.connectMs, MAX_WAIT_MS)));
  }
  return Promise.all(checks);
}

async function checkStore(config: Config): Promise<ConnectResult> {
  const store = config.store;
  if (store.kind === 'memory') return { what: 'store memory', ok: true, detail: 'in this process, nothing to connect to' };
  const what = `store ${withoutPassword(store.url)}`;
  if (!store.url) return { what, ok: false, detail: 'no URL' };
  const client = new Redis(store.url, {
    lazyConnect: true,
    connectTimeout: Math.min(store.connectTimeoutMs, MAX_WAIT_MS),
    commandTimeout: MAX_WAIT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // connect() itself only says "Connection is closed."; the socket's error says why.
  let socketError: unknown;
  client.on('error', (err) => (socketError = err));
  const started = Date.now();
  try {
    await client.connect();
    const pong = await client.ping();
    return { what, ok: true, detail: `answered PING with ${pong} in ${Date.now() - started} ms` };
  } catch (err) {
    return { what, ok: false, detail: `does not answer PING: ${reason(socketError ?? err)}` };
  } finally {
    client.disconnect();
  }
}

/** Any HTTP answer counts: the gateway only needs the upstream to be there (a 404 at its root is fine). */
async function checkUpstream(name: string, url: string, timeoutMs: number): Promise<ConnectResult> {
  const what = `upstream ${name} ${url}`;
  const started = Date.now();
  try {
    const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return { what, ok: true, detail: `answered HTTP ${res.status} in ${Date.now() - started} ms` };
  } catch (err) {
    return { what, ok: false, detail: `does not answer: ${reason(err)}` };
  }
}

function reason(err: unknown): string {
  const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return 'no answer in time';
  return e.cause?.code ?? e.code ?? e.cause?.message ?? e.message ?? String(err);
}

function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}
