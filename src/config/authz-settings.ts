import { METHODS } from 'node:http';
import { parseAddressOrBlock } from '../core/addresses.js';
import type { Checker } from './checker.js';
import { childrenOf } from './defaults.js';
import { readIssuers } from './issuer-settings.js';
import { nearest } from './suggest.js';
import { readScalars } from './sections.js';
import type { AllowConfig, AssertionConfig, ForwardAuthConfig, IdentityConfig, RouteConfig } from './types.js';

/** The authorization settings (issue 18): forwardAuth, identity, users.groups, routes[].allow/audience. */

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const PLAIN_PATH = /^\/(?:[A-Za-z0-9._~-]+\/)*[A-Za-z0-9._~-]+$/;
/** The gateway's own endpoints, answered before authentication whatever the routes say. */
const OWN_PATHS = ['/healthz', '/readyz', '/openapi.json'];
/** The JWK Set of the identity assertions' keys: an own endpoint too, with identity.assertion configured. */
export const JWKS_PATH = '/.well-known/jwks.json';
/** Headers the assertion header must not be: the gateway sets or strips these for other reasons. */
const RESERVED_HEADERS = new Set([
  'authorization', 'proxy-authorization', 'cookie', 'host', 'connection', 'upgrade', 'content-length', 'transfer-encoding',
  'x-authenticated-user', 'x-authenticated-via', 'x-authenticated-groups', 'x-request-id',
  'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-method', 'x-forwarded-uri', 'forwarded',
]);

/** `forwardAuth`: absent, null or false for none. */
export function readForwardAuth(c: Checker, raw: unknown): ForwardAuthConfig | undefined {
  if (raw === undefined || raw === null || raw === false) return undefined;
  const f = c.obj('forwardAuth', raw);
  c.unknownKeys('forwardAuth', f, childrenOf('forwardAuth'));
  const { path } = readScalars(c, 'forwardAuth', f);
  if (path && !PLAIN_PATH.test(path)) c.problem('forwardAuth.path', 'must be an absolute path of plain segments without a trailing slash, e.g. /auth/verify');
  else if (/^\/v1\/tokens(?:\/|$)/i.test(path)) c.problem('forwardAuth.path', 'must not be under /v1/tokens (served by the gateway itself)');
  else if ([...OWN_PATHS, JWKS_PATH].includes(path)) c.problem('forwardAuth.path', `must not be ${path} (served by the gateway itself)`);
  return { path, trustedProxies: readTrustedProxies(c, f.trustedProxies) };
}

/** `forwardAuth.trustedProxies`: absent for any caller; else a non-empty list of addresses and CIDR blocks. */
function readTrustedProxies(c: Checker, raw: unknown): string[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  const key = 'forwardAuth.trustedProxies';
  const list = c.list(key, raw);
  if (Array.isArray(raw) && list.length === 0) c.problem(key, 'must name at least one address or CIDR block (leave it out to let any caller ask)');
  return list.map((entry, i) => {
    const text = typeof entry === 'string' ? entry.trim() : c.str(`${key}[${i}]`, entry);
    if (typeof entry === 'string' && !parseAddressOrBlock(text)) c.problem(`${key}[${i}]`, `must be an IPv4 or IPv6 address or CIDR block (10.0.0.0/8, fd00::/8), not "${text}"`);
    return text;
  });
}

/** `identity`: `assertion` absent, null or false for none. */
export function readIdentity(c: Checker, raw: unknown, at: (p: string) => string): IdentityConfig {
  const i = c.obj('identity', raw);
  c.unknownKeys('identity', i, childrenOf('identity'));
  const issuers = readIssuers(c, i.issuers, at);
  if (i.assertion === undefined || i.assertion === null || i.assertion === false) return { assertion: undefined, issuers };
  const a = c.obj('identity.assertion', i.assertion === true ? {} : i.assertion);
  c.unknownKeys('identity.assertion', a, childrenOf('identity.assertion'));
  const assertion: AssertionConfig = readScalars(c, 'identity.assertion', a, { at });
  const header = assertion.header;
  if (!TOKEN.test(header)) c.problem('identity.assertion.header', 'must be a header name');
  else if (header.includes('_')) c.problem('identity.assertion.header', 'must not contain _ (proxies and the gateway read _ and - alike in header names, so the _ spelling would slip past the removal)');
  else if (RESERVED_HEADERS.has(header.toLowerCase())) c.problem('identity.assertion.header', `must not be ${header} (the gateway sets or removes it for another purpose)`);
  return { assertion, issuers };
}

/** `users.groups`: the htgroup file, relative to the configuration file. */
export function readGroupsFile(c: Checker, raw: unknown, at: (p: string) => string): string | undefined {
  if (raw === undefined || raw === null || raw === false || raw === '') return undefined;
  const file = c.str('users.groups', raw);
  return file ? at(file) : undefined;
}

/**
 * A method of an allow rule: one no request can have (not a method Node's HTTP parser accepts: `FETCH`)
 * is refused, as the rule could never let anyone use it; one in lower case (`get`) is read as the
 * method it spells (methods are upper case) and warned about.
 */
function checkMethod(c: Checker, key: string, name: string): void {
  const upper = name.toUpperCase();
  if (!METHODS.includes(upper)) {
    const hint = nearest(upper, METHODS);
    c.problem(key, `is ${name}, which is not an HTTP method the gateway can receive: no request would ever match it${hint ? `; did you mean ${hint}?` : ''}`);
  } else if (upper !== name) {
    c.warning(c.at(key), `is ${name}: methods are upper case; read as ${upper} (write ${upper})`);
  }
}

/** `routes[i].allow`: users, groups, methods; at least one, and not a rule that lets no one in. */
export function readAllow(c: Checker, key: string, raw: unknown, groupsFile: string | undefined): AllowConfig | undefined {
  if (raw === undefined || raw === null) return undefined;
  const a = c.obj(key, raw);
  c.unknownKeys(key, a, ['users', 'groups', 'methods']);
  const names = (field: 'users' | 'groups' | 'methods') => a[field] === undefined || a[field] === null ? undefined
    : (typeof a[field] === 'string' ? [a[field]] : c.list(`${key}.${field}`, a[field])).map((v, j) => {
      const name = c.str(`${key}.${field}[${j}]`, typeof v === 'number' ? String(v) : v);
      if (field === 'methods' && name && !TOKEN.test(name)) c.problem(`${key}.${field}[${j}]`, 'must be a method name');
      else if (name && /[\s,:]/.test(name)) c.problem(`${key}.${field}[${j}]`, 'must not contain spaces, commas or colons');
      else if (field === 'methods' && name) checkMethod(c, `${key}.${field}[${j}]`, name);
      return field === 'methods' ? name.toUpperCase() : name;
    });
  const allow: AllowConfig = {};
  const users = names('users');
  const groups = names('groups');
  const methods = names('methods');
  if (users) allow.users = users;
  if (groups) allow.groups = groups;
  if (methods) allow.methods = methods;
  if (!users && !groups && !methods) c.problem(key, 'must name users, groups or methods (leave allow out to let every authenticated user in)');
  else if ((users || groups) && (users ?? []).length === 0 && (groups ?? []).length === 0) c.problem(key, 'lets no one in: list users or groups (or remove the route)');
  if (methods && methods.length === 0) c.problem(`${key}.methods`, 'lists no method: leave it out to allow every method');
  if (groups && groups.length > 0 && !groupsFile) c.problem(`${key}.groups`, 'names groups, but no source of groups is set: users.groups (the htgroup file), users.store, apiKeys, users.ldap.groupsBase, an identity.issuers groupsClaim or server.tls.clientCa (client certificates, their OU values)');
  return allow;
}

/**
 * Checks across sections: a route whose path is an own endpoint of the gateway or lies above one would
 * never see that path (the gateway answers it first); a route without upstream needs forwardAuth.
 */
export function checkRouteOverlaps(c: Checker, routes: RouteConfig[], forwardAuth: ForwardAuthConfig | undefined, identity: IdentityConfig): void {
  const own = [...OWN_PATHS];
  if (identity.assertion) own.push(JWKS_PATH);
  if (forwardAuth?.path) own.push(forwardAuth.path);
  routes.forEach((r, i) => {
    if (!r.path) return;
    for (const path of own) {
      if (path === r.path || path.startsWith(`${r.path}/`)) {
        c.problem(`routes[${i}].path`, `overlaps ${path}, which the gateway serves itself: choose a route path that does not cover it`);
      }
    }
    if (r.upstream === undefined && !forwardAuth) c.problem(`routes[${i}].upstream`, 'is required (only with forwardAuth may a route leave it out)');
  });
}

/**
 * A route with allow rules under a prefix route without any (`/api` open to every authenticated user,
 * `/api/admin` to admins): the gateway gives `/api/admin/...` the child's rules, but a spelling of that
 * path the gateway does not match to the child and the upstream treats as the same (a case variant, an
 * encoded or doubled character the upstream decodes or merges) falls to the parent's route and its
 * upstream without them. A warning: the pair may be meant (the parent's upstream may not serve the path).
 */
export function checkUnguardedParents(c: Checker, routes: readonly RouteConfig[]): void {
  routes.forEach((child, i) => {
    if (!child.allow || !child.path) return;
    // The nearest enclosing route decides what a variant that misses the child reaches.
    const parents = routes
      .map((r, j) => ({ r, j }))
      .filter(({ r }) => r.path && r.path !== child.path && child.path.toLowerCase().startsWith(`${r.path.toLowerCase()}/`))
      .sort((a, b) => b.r.path.length - a.r.path.length);
    const parent = parents[0];
    if (!parent || parent.r.allow) return;
    c.warning(c.at(`routes[${i}].path`), `${child.path} has allow rules, but ${c.at(`routes[${parent.j}].path`)} ${parent.r.path}, above it, has none: `
      + `a spelling of ${child.path} that its upstream treats as the same path (another case, an encoded or doubled character) `
      + `may reach the route ${parent.r.path} without them; give ${parent.r.path} allow rules too, or make sure its upstream does not serve ${child.path}`);
  });
}

/**
 * Names in allow rules that are in neither file: a user not in the htpasswd file (`users`) or a group
 * the htgroup file does not define (`groups`) lets no one in through that entry, most likely a typo.
 * Warnings, as the file may be about to gain them (the gateway rereads it). `users`: the htpasswd
 * file's users; `groups`: the htgroup table, undefined when it was not read.
 */
export function allowNameWarnings(routes: readonly RouteConfig[], users: ReadonlySet<string> | undefined, groups: ReadonlyMap<string, readonly string[]> | undefined, at: (key: string) => string): string[] {
  const known = groups ? new Set([...groups.values()].flat()) : undefined;
  const out: string[] = [];
  routes.forEach((r, i) => {
    r.allow?.users?.forEach((u, j) => {
      if (users && u && !users.has(u)) {
        const hint = nearest(u, [...users]);
        out.push(`${at(`routes[${i}].allow.users[${j}]`)} is "${u}", who is not in the users file (users.htpasswd): this entry lets no one into ${r.path}${hint ? `; did you mean ${hint}?` : ''}`);
      }
    });
    r.allow?.groups?.forEach((g, j) => {
      if (known && g && !known.has(g)) {
        const hint = nearest(g, [...known]);
        out.push(`${at(`routes[${i}].allow.groups[${j}]`)} is "${g}", a group with no members in the groups file (users.groups): this entry lets no one into ${r.path}${hint ? `; did you mean ${hint}?` : ''}`);
      }
    });
  });
  return out;
}
