import type { Config } from '../config/types.js';
import { REMOVED_HEADERS } from '../core/header-table.js';
import { JWKS_PATH } from '../identity/jwks.js';

/**
 * What every front-proxy recipe is made from: the gateway's configuration read once into the facts a
 * proxy needs (where the gateway is, which paths it answers itself, the upstreams, which headers the
 * forward-auth answer sets and which the proxy must clear). Each recipe (nginx, Caddy, Traefik,
 * ingress-nginx) only writes these facts in its proxy's language, so a recipe cannot clear less than
 * the gateway does: both read REMOVED_HEADERS.
 */
export interface Site {
  /** Where the front proxy listens: `:80`, `127.0.0.1:8081`, `[::1]:80`. */
  listen: { host: string | undefined; port: number };
  /** Where the front proxy reaches the gateway. */
  gateway: { scheme: 'http' | 'https'; hostPort: string };
  /** forwardAuth.path. */
  askPath: string;
  /** Exact paths the gateway answers itself (health, readiness, the OpenAPI document, the JWK Set, sign-in). */
  ownPaths: string[];
  /** Path prefixes the gateway answers itself, everything under them included (`/v1/tokens`). */
  ownPrefixes: string[];
  upstreams: SiteUpstream[];
  /** Headers the forward-auth answer sets for the upstream, as written (`X-Authenticated-User`, …). */
  answerHeaders: string[];
  /**
   * Browser sign-in is configured: browsers without a session are sent to sign in, and the proxy sends on
   * the answer's `Cookie` (the client's without the gateway's own); without it the client's cookies pass.
   */
  login: boolean;
  /** Headers the proxy clears on the request it sends on (lower case): the table's and the API key header. */
  cleared: string[];
  /** Families of headers (prefixes, lower case), with their known members for proxies that need names. */
  families: Array<{ prefix: string; members: readonly string[] }>;
  /** The longest an upstream may take to accept a connection, and to answer or stream (ms). */
  connectTimeoutMs: number;
  readTimeoutMs: number;
  /** What the proxy's operator should know: a setting that makes the recipe less than the gateway. */
  warnings: string[];
}

interface SiteUpstream {
  name: string;
  scheme: 'http' | 'https';
  /** host:port of each target (the port always written). */
  targets: string[];
  /** A base path of the upstream URL other than `/` (the gateway joins it; proxies need it said). */
  basePath: string;
  preserveHost: boolean;
  /** How the proxy speaks to it: HTTP/1.1, or HTTP/2 (cleartext with prior knowledge, or TLS) for gRPC. */
  protocol: 'http1' | 'h2c' | 'h2';
}

export interface SiteOptions {
  /** Where the proxy listens (`:80` by default). */
  listen?: string;
  /** Where the proxy reaches the gateway (default from server.host and server.port). */
  gateway?: string;
}

/** A recipe cannot be made from this configuration (exit 2, the message says what to change). */
export class RecipeError extends Error {}

/** The gateway's own header names as the answer writes them (Title-Case with `-`). */
const ANSWER_NAMES = ['X-Authenticated-User', 'X-Authenticated-Via', 'X-Authenticated-Groups'];
export const UPSTREAM_HEADER = 'X-Gateway-Upstream';

export function siteOf(config: Config, options: SiteOptions = {}): Site {
  const forwardAuth = config.forwardAuth;
  if (!forwardAuth) {
    throw new RecipeError('a recipe asks the gateway about every request through forward-auth: add `forwardAuth: { path: /auth/verify, trustedProxies: [<the proxy\'s address>] }` to the configuration');
  }
  const warnings: string[] = [];
  for (const route of config.routes) {
    if (route.upstream === undefined) {
      throw new RecipeError(`routes: ${route.path} has no upstream; a recipe sends each request to the upstream of the route the gateway judged it by: give it one`);
    }
    if (route.stripPrefix) {
      throw new RecipeError(`routes: ${route.path} strips its prefix (stripPrefix), which a proxy asking forward-auth cannot do the way the gateway does; serve it through the gateway itself, or without stripPrefix`);
    }
    if (route.forwardAuthorization) warnings.push(`routes: ${route.path} forwards Authorization when the gateway proxies it; through the recipe the upstream never receives it`);
  }
  if (forwardAuth.trustedProxies === undefined) warnings.push(`forwardAuth: ${forwardAuth.path} answers any client that reaches the gateway; set forwardAuth.trustedProxies to the proxy's address`);
  if (config.server.trustProxy < 1) warnings.push('server.trustProxy is 0: the gateway keys lockouts and rate limits on the proxy\'s address, not the client\'s; set it to 1 behind this proxy');

  const ownPaths = ['/healthz', '/readyz', '/openapi.json'];
  if (config.identity.assertion) ownPaths.push(JWKS_PATH);
  if (config.login) ownPaths.push(config.login.callbackPath, config.login.logoutPath, config.login.backchannelLogoutPath, config.login.mePath);
  const answerHeaders = [...ANSWER_NAMES];
  if (config.identity.assertion) answerHeaders.push(config.identity.assertion.header);

  const cleared = new Set<string>();
  for (const h of REMOVED_HEADERS) {
    if (h.kind === 'forwarding' || h.family) continue;
    cleared.add(h.name);
  }
  if (config.identity.assertion) cleared.add(config.identity.assertion.header.toLowerCase());
  if (config.apiKeys) cleared.add(config.apiKeys.header.toLowerCase());
  // Rebuilt by the proxy from its own connection: the ones it does not set are cleared.
  for (const name of ['x-forwarded-port', 'forwarded', 'x-real-ip']) cleared.add(name);

  let connectTimeoutMs = 0;
  let readTimeoutMs = 0;
  for (const u of Object.values(config.upstreams)) {
    connectTimeoutMs = Math.max(connectTimeoutMs, u.timeouts.connectMs);
    readTimeoutMs = Math.max(readTimeoutMs, u.timeouts.responseMs, u.timeouts.idleMs);
  }
  for (const route of config.routes) {
    readTimeoutMs = Math.max(readTimeoutMs, route.timeouts.responseMs, route.timeouts.idleMs);
  }

  return {
    listen: parseListen(options.listen ?? ':80'),
    gateway: parseGateway(options.gateway ?? defaultGateway(config)),
    askPath: forwardAuth.path,
    ownPaths,
    // The sign-in page and its stylesheet (under it): the confirmation page of sign-out uses it too.
    ownPrefixes: config.login ? ['/v1/tokens', config.login.signInPath] : ['/v1/tokens'],
    upstreams: Object.entries(config.upstreams).map(([name, u]) => upstreamOf(name, u.targets, u.preserveHost, u.protocol ?? 'http1')),
    answerHeaders,
    login: config.login !== undefined,
    cleared: [...cleared],
    families: REMOVED_HEADERS.filter((h) => h.family).map((h) => ({ prefix: h.name, members: h.members ?? [] })),
    connectTimeoutMs: connectTimeoutMs || 5000,
    readTimeoutMs: readTimeoutMs || 60_000,
    warnings,
  };
}

function upstreamOf(name: string, targets: readonly string[], preserveHost: boolean, protocol: SiteUpstream['protocol']): SiteUpstream {
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new RecipeError(`upstreams: the name ${JSON.stringify(name)} cannot name a proxy's upstream; use letters, digits, - and _`);
  const urls = targets.map((t) => new URL(t));
  const scheme = urls[0]!.protocol === 'https:' ? 'https' : 'http';
  if (urls.some((u) => u.protocol !== urls[0]!.protocol)) throw new RecipeError(`upstreams.${name}: its targets mix http and https`);
  const basePath = urls[0]!.pathname.replace(/\/+$/, '');
  if (urls.some((u) => u.pathname.replace(/\/+$/, '') !== basePath)) throw new RecipeError(`upstreams.${name}: its targets have different paths`);
  if (basePath !== '') throw new RecipeError(`upstreams.${name}: its URL has a path (${basePath}), which the gateway joins to every request's; a proxy asking forward-auth forwards the path as the client sent it`);
  return {
    name,
    scheme,
    targets: urls.map((u) => `${u.hostname.includes(':') && !u.hostname.startsWith('[') ? `[${u.hostname}]` : u.hostname}:${u.port || (scheme === 'https' ? '443' : '80')}`),
    basePath,
    preserveHost,
    protocol,
  };
}

function defaultGateway(config: Config): string {
  const host = config.server.host === '0.0.0.0' || config.server.host === '::' ? '127.0.0.1' : config.server.host;
  const scheme = config.server.tls ? 'https' : 'http';
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${config.server.port}`;
}

function parseGateway(text: string): Site['gateway'] {
  let url: URL;
  try {
    url = new URL(text.includes('://') ? text : `http://${text}`);
  } catch {
    throw new RecipeError(`--gateway ${text}: not a URL (http://127.0.0.1:8080)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new RecipeError(`--gateway ${text}: the scheme must be http or https`);
  if (url.pathname !== '/' || url.search || url.username) throw new RecipeError(`--gateway ${text}: give scheme, host and port only`);
  const scheme = url.protocol === 'https:' ? 'https' : 'http';
  return { scheme, hostPort: `${url.hostname}:${url.port || (scheme === 'https' ? '443' : '80')}` };
}

function parseListen(text: string): Site['listen'] {
  const m = /^(?:(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)?:)?([0-9]{1,5})$/.exec(text);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 1 && port <= 65535)) throw new RecipeError(`--listen ${text}: give [ADDRESS]:PORT (:80, 127.0.0.1:8081, [::1]:80)`);
  return { host: m[1], port };
}

/** The spellings of a header name with `_` for one or more of its `-` (what CGI-style upstreams read as the name). */
export function underscoreSpellings(name: string): string[] {
  const parts = name.split('-');
  const out: string[] = [];
  const gaps = parts.length - 1;
  for (let mask = 1; mask < 1 << gaps; mask++) {
    let s = parts[0]!;
    for (let i = 0; i < gaps; i++) s += ((mask >> i) & 1 ? '_' : '-') + parts[i + 1]!;
    out.push(s);
  }
  return out;
}

/** `x-authenticated-user` → `X-Authenticated-User`: how the recipes write a header name. */
export function titleCase(name: string): string {
  return name.replace(/(^|[-_])([a-z])/g, (_, sep: string, c: string) => sep + c.toUpperCase());
}

/** A problem body the proxy writes itself (the gateway cannot be asked, an upstream failed), as the gateway writes its own. */
export function proxyProblem(status: 502 | 503 | 504): string {
  const [code, title, detail] = status === 502 ? ['bad_gateway', 'Bad Gateway', 'the upstream service could not be reached']
    : status === 504 ? ['gateway_timeout', 'Gateway Timeout', 'the upstream service did not answer in time']
    : ['service_unavailable', 'Service Unavailable', 'the gateway could not be asked about this request; retry shortly'];
  return JSON.stringify({ type: `urn:auth-gateway:problem:${code}`, title, status, detail, code });
}
