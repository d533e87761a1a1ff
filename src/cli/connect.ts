import { systemClock } from '../clock.js';
import type { Config, IssuerConfig, LoginProviderConfig, RedisTopology } from '../config/types.js';
import { IssuerKeys } from '../identity/issuer-keys.js';
import { Directory } from '../credentials/directory.js';
import { describeLoginProvider } from '../auth/login.js';
import { silentLogger } from '../log.js';
import { RedisSessionStore } from '../stores/sessions/redis-session-store.js';

export interface ConnectResult {
  /** What was tried, e.g. `store redis://127.0.0.1:6379` or `upstream contacts http://…`. */
  what: string;
  ok: boolean;
  detail: string;
}

/** The longest any one check waits: the store's or an upstream's own connect timeout, at most this. */
const MAX_WAIT_MS = 5000;

/** `config check --connect`: does the store answer PING, does each upstream answer HTTP? All at once. */
export function checkConnections(config: Config): Promise<ConnectResult[]> {
  const checks: Array<Promise<ConnectResult>> = [checkStore(config)];
  if (config.users.ldap) checks.push(checkDirectory(config));
  for (const [name, u] of Object.entries(config.upstreams)) {
    for (const url of u.targets) if (url) checks.push(checkUpstream(name, url, Math.min(u.timeouts.connectMs, MAX_WAIT_MS)));
  }
  config.identity.issuers.forEach((issuer, i) => checks.push(checkIssuer(issuer, i)));
  for (const provider of config.login?.providers ?? []) checks.push(checkLogin(config, provider));
  return Promise.all(checks);
}

/** An OpenID provider as the gateway would use it: its discovery document (unless jwksUri is set) and its keys. */
/** A provider of `login`: its discovery as browser sign-in reads it. */
async function checkLogin(config: Config, provider: LoginProviderConfig): Promise<ConnectResult> {
  const issuer = config.identity.issuers.find((i) => i.name === provider.issuer)!;
  const what = `sign-in at ${issuer.name} (client ${provider.clientId})`;
  try {
    return { what, ok: true, detail: await describeLoginProvider(provider, issuer.issuer, issuer.caFile) };
  } catch (err) {
    return { what, ok: false, detail: `discovery failed: ${reason(err)}` };
  }
}

async function checkIssuer(config: IssuerConfig, index: number): Promise<ConnectResult> {
  const what = `issuer ${config.name} ${config.issuer}`;
  const started = Date.now();
  try {
    const keys = new IssuerKeys(config, systemClock, silentLogger, undefined, index);
    const discovered = config.jwksUri === undefined ? (await keys.discover()).jwksUri : undefined;
    await keys.refresh();
    const list = keys.known().map((k) => `${k.kid ?? '(no kid)'} ${k.algs.join('/')}`).join(', ');
    const source = discovered ? `discovery named ${discovered}` : `jwksUri ${keys.keysUrl()}`;
    return { what, ok: true, detail: `${source}; ${keys.known().length} usable key(s): ${list}; in ${Date.now() - started} ms` };
  } catch (err) {
    return { what, ok: false, detail: `keys not fetched: ${reason(err)}` };
  }
}

/**
 * The store as the gateway would use it: the same client, topology and readiness check (a master that
 * accepts writes, or a cluster whose state is ok), within the connect timeout.
 */
async function checkStore(config: Config): Promise<ConnectResult> {
  const store = config.store;
  if (store.kind === 'memory') return { what: 'store memory', ok: true, detail: 'in this process, nothing to connect to' };
  const what = `store ${describeTopology(store.topology)}`;
  const started = Date.now();
  const outages: string[] = [];
  // A single node that refused has answered: no need to wait out the connect timeout for it.
  let refused: () => void = () => {};
  const failedFast = new Promise<boolean>((resolve) => (refused = () => resolve(false)));
  // The store logs the cause of an outage once (MOVED, READONLY, refused…): that is the detail to show.
  const log = {
    ...silentLogger,
    error: (_msg: string, fields?: Record<string, unknown>) => {
      outages.push(String(fields?.cause ?? fields?.error ?? ''));
      if (store.topology.mode === 'single') refused();
    },
  };
  const waitMs = Math.min(store.connectTimeoutMs, MAX_WAIT_MS);
  const client = new RedisSessionStore({ ...store, connectTimeoutMs: waitMs }, log);
  try {
    if (!(await Promise.race([client.waitUntilReady(waitMs), failedFast]))) throw new Error(outages[0] || `no connection within ${waitMs} ms`);
    await client.ping();
    return { what, ok: true, detail: `ready (a writable master${store.topology.mode === 'cluster' ? ', a master answering with cluster_state ok' : ''}) in ${Date.now() - started} ms` };
  } catch (err) {
    return { what, ok: false, detail: `is not ready: ${outages[0] || reason(err)}` };
  } finally {
    await client.close();
  }
}

/** The directory of users.ldap as the gateway would reach it (TLS, CA): the service bind, or an anonymous read of the root DSE. */
async function checkDirectory(config: Config): Promise<ConnectResult> {
  const ldap = config.users.ldap!;
  const what = `directory ${ldap.url}${ldap.startTls ? ' (StartTLS)' : ''}`;
  try {
    return { what, ok: true, detail: await new Directory(ldap, silentLogger).check() };
  } catch (err) {
    return { what, ok: false, detail: `does not answer as configured: ${(err as Error).message}` };
  }
}

function describeTopology(t: RedisTopology): string {
  if (t.mode === 'single') return withoutPassword(t.url);
  if (t.mode === 'cluster') return `cluster ${t.nodes.map(withoutPassword).join(', ')}`;
  return `sentinel ${t.name} via ${t.sentinels.join(', ')}`;
}

/** Any HTTP answer passes: the gateway only needs the upstream to be there (a 404 at its root is fine), and the line says so. */
async function checkUpstream(name: string, url: string, timeoutMs: number): Promise<ConnectResult> {
  const what = `upstream ${name} ${url}`;
  const started = Date.now();
  try {
    const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return { what, ok: true, detail: `answered HTTP ${res.status} in ${Date.now() - started} ms: reachable, passes (any HTTP status does)` };
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
