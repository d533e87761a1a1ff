import { timingSafeEqual, createHash } from 'node:crypto';
import type Koa from 'koa';
import type { ApiKeysConfig } from '../config/types.js';
import { hash } from '../credentials/bcrypt.js';
import { acceptablePassword } from '../credentials/password-verifier.js';
import { otherSpellings } from '../credentials/user-sources.js';
import { HttpProblem } from '../http/problem.js';
import type { Logger } from '../log.js';
import { listOf, parseDuration, readKeySpec } from '../stores/tables/api-key-spec.js';
import type { ApiKeyRecord, ApiKeys } from '../stores/tables/api-keys.js';
import type { StoreUsers } from '../stores/tables/store-users.js';

/** What the admin API manages, as configured at start (each undefined when off). */
export interface AdminApiParts {
  /** admin.apiToken: the bearer secret the API asks for; undefined: the admin API is off. */
  token: string | undefined;
  apiKeys: ApiKeys | undefined;
  apiKeysConfig: () => ApiKeysConfig | undefined;
  storeUsers: StoreUsers | undefined;
  /** Ends a user's sessions on every instance (a removed user, a changed password). */
  endSessions: (user: string) => Promise<number>;
  /** Users of the htpasswd file in force: a store user may not have one of their names. */
  fileUsers: () => ReadonlySet<string>;
  log: Logger;
}

const MAX_BODY_BYTES = 16 * 1024;
const MIN_PASSWORD_CHARACTERS = 8;
const BCRYPT_COST = 10;
// eslint-disable-next-line no-control-regex
const UNSAFE_NAME = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff,:\s]/u;

/**
 * The admin API on the admin listener: API keys (`/v1/keys`) and users kept in the store
 * (`/v1/users`), behind `Authorization: Bearer <admin.apiToken>`. Off (404) without a token. Every
 * change writes an audit line naming who made it (the admin API from which address, with the
 * caller's `X-Admin-Actor` when it sends one) and what changed; never a key, a password or a hash.
 */
export function adminApi(parts: AdminApiParts): Koa.Middleware {
  const expected = parts.token === undefined ? undefined : digest(parts.token);
  return async function serveAdminApi(ctx, next) {
    const path = ctx.path;
    if (!path.startsWith('/v1/keys') && !path.startsWith('/v1/users')) return next();
    if (!expected) throw new HttpProblem(404, 'not_found', 'the admin API is off (set admin.apiToken)');
    const m = /^Bearer ([^\s]+)$/i.exec(ctx.get('authorization'));
    if (!m || !timingSafeEqual(digest(m[1]!), expected)) {
      throw new HttpProblem(401, 'invalid_token', 'the admin API needs Authorization: Bearer <admin.apiToken>', { headers: { 'WWW-Authenticate': 'Bearer realm="auth-gateway-admin"' } });
    }
    const actor = { by: 'admin-api', address: ctx.req.socket.remoteAddress, actor: ctx.get('x-admin-actor').slice(0, 128) || undefined };
    const audit = (action: string, fields: Record<string, unknown>) => parts.log.info('audit', { action, ...actor, ...fields });
    if (path === '/v1/keys' || path.startsWith('/v1/keys/')) return keysApi(ctx, keys(), audit);
    return usersApi(ctx, users(), audit);
  };

  function keys(): { keys: ApiKeys; prefix: string } {
    const config = parts.apiKeysConfig();
    if (!parts.apiKeys || !config) throw new HttpProblem(404, 'not_found', 'API keys are off (set apiKeys)');
    return { keys: parts.apiKeys, prefix: config.prefix };
  }

  function users(): StoreUsers {
    if (!parts.storeUsers) throw new HttpProblem(404, 'not_found', 'users in the store are off (set users.store: true)');
    return parts.storeUsers;
  }

  async function keysApi(ctx: Koa.Context, { keys, prefix }: { keys: ApiKeys; prefix: string }, audit: Audit): Promise<void> {
    const m = /^\/v1\/keys(?:\/([0-9a-f]{16})(\/rotate)?)?$/.exec(ctx.path);
    if (!m) throw new HttpProblem(404, 'not_found', 'no such admin resource');
    const [, id, rotate] = m;
    if (!id) {
      if (ctx.method === 'GET') return void (ctx.body = { keys: await keys.list() });
      allow(ctx, 'POST', 'GET, POST');
      const { spec, problems } = readKeySpec(await body(ctx));
      if (problems.length > 0) throw new HttpProblem(400, 'invalid_request', problems.join('; '));
      const { record, key } = await keys.create(spec, prefix);
      audit('key created', { keyId: record.id, keyName: record.name, user: record.user });
      ctx.status = 201;
      ctx.body = { key, ...info(record) };
      return;
    }
    if (rotate) {
      allow(ctx, 'POST', 'POST');
      const raw = (await body(ctx, true)).overlap;
      const overlap = raw === undefined || raw === '0' || raw === 0 ? 0 : typeof raw === 'string' ? parseDuration(raw) : undefined;
      if (overlap === undefined) throw new HttpProblem(400, 'invalid_request', 'overlap must be a duration such as 24h, 30m or "0"');
      const rotated = await keys.rotate(id, overlap, prefix);
      if (!rotated) throw new HttpProblem(404, 'not_found', `there is no key ${id}`);
      audit('key rotated', { keyId: id, keyName: rotated.record.name, newKeyId: rotated.record.id, overlapSeconds: overlap });
      ctx.status = 201;
      ctx.body = { key: rotated.key, ...info(rotated.record), previous: { id, expiresAtMs: overlap === 0 ? undefined : rotated.old.expiresAtMs } };
      return;
    }
    allow(ctx, 'DELETE', 'DELETE');
    const old = await keys.revoke(id);
    if (!old) throw new HttpProblem(404, 'not_found', `there is no key ${id}`);
    audit('key revoked', { keyId: id, keyName: old.name });
    ctx.status = 204;
  }

  async function usersApi(ctx: Koa.Context, users: StoreUsers, audit: Audit): Promise<void> {
    const m = /^\/v1\/users(?:\/([^/]+)(?:\/(password|groups))?)?$/.exec(ctx.path);
    if (!m) throw new HttpProblem(404, 'not_found', 'no such admin resource');
    const name = m[1] === undefined ? undefined : safeDecode(m[1]);
    const part = m[2];
    if (name === undefined) {
      if (ctx.method === 'GET') return void (ctx.body = { users: await users.list() });
      allow(ctx, 'POST', 'GET, POST');
      const b = await body(ctx);
      const user = typeof b.name === 'string' ? b.name : '';
      checkName(user);
      const groups = groupsOf(b.groups);
      const hashed = await hash(password(b.password), { cost: BCRYPT_COST });
      if (!(await users.add(user, hashed, groups))) throw new HttpProblem(409, 'invalid_request', `user "${user}" is already in the store`);
      audit('user added', { user, groups });
      ctx.status = 201;
      ctx.body = { name: user, groups };
      return;
    }
    if (part === 'password') {
      allow(ctx, 'PUT', 'PUT');
      const hashed = await hash(password((await body(ctx)).password), { cost: BCRYPT_COST });
      if (!(await users.passwd(name, hashed))) throw new HttpProblem(404, 'not_found', `there is no user "${name}" in the store`);
      await parts.endSessions(name);
      audit('user password changed', { user: name });
      ctx.status = 204;
      return;
    }
    if (part === 'groups') {
      allow(ctx, 'PUT', 'PUT');
      const groups = groupsOf((await body(ctx)).groups);
      if (!(await users.setGroups(name, groups))) throw new HttpProblem(404, 'not_found', `there is no user "${name}" in the store`);
      audit('user groups set', { user: name, groups });
      ctx.body = { name, groups };
      return;
    }
    allow(ctx, 'DELETE', 'DELETE');
    const removed = await users.remove(name);
    await parts.endSessions(name);
    if (!removed) throw new HttpProblem(404, 'not_found', `there is no user "${name}" in the store`);
    audit('user removed', { user: name });
    ctx.status = 204;
  }

  function checkName(name: string): void {
    if (name === '' || name.length > 128 || UNSAFE_NAME.test(name)) throw new HttpProblem(400, 'invalid_request', 'name must be 1 to 128 characters, without spaces, ":", "," or control characters');
    if (parts.fileUsers().has(name)) throw new HttpProblem(409, 'invalid_request', `user "${name}" is in the users file; a name may be in only one source`);
    const spelling = otherSpellings(parts.fileUsers())(name);
    if (spelling !== undefined) {
      throw new HttpProblem(409, 'invalid_request', `user "${name}" differs from "${spelling}" of the users file only by case: a name may be in only one source, whatever its case`);
    }
  }
}

type Audit = (action: string, fields: Record<string, unknown>) => void;

function info(record: ApiKeyRecord): Omit<ApiKeyRecord, 'sha256'> {
  const { sha256: _sha256, ...rest } = record;
  return rest;
}

function allow(ctx: Koa.Context, method: string, allowed: string): void {
  if (ctx.method !== method) throw new HttpProblem(405, 'method_not_allowed', `${ctx.method} is not allowed here`, { headers: { Allow: allowed } });
}

function password(value: unknown): string {
  if (typeof value !== 'string') throw new HttpProblem(400, 'invalid_request', 'password is required (a string)');
  if ([...value].length < MIN_PASSWORD_CHARACTERS) throw new HttpProblem(400, 'invalid_request', `password must have at least ${MIN_PASSWORD_CHARACTERS} characters`);
  if (!acceptablePassword(value)) throw new HttpProblem(400, 'invalid_request', 'password must be at most 72 bytes, without NUL');
  return value;
}

function groupsOf(value: unknown): string[] {
  if (value !== undefined && typeof value !== 'string' && !(Array.isArray(value) && value.every((v) => typeof v === 'string'))) {
    throw new HttpProblem(400, 'invalid_request', 'groups must be a list of names (or comma-separated text)');
  }
  const groups = listOf(value as string | string[] | undefined);
  for (const g of groups) if (UNSAFE_NAME.test(g)) throw new HttpProblem(400, 'invalid_request', `"${g}" is not a group name`);
  return groups;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new HttpProblem(400, 'invalid_path', 'the user name in the path is not valid percent-encoding');
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** A JSON object body of at most 16 KiB; `optional`: an empty body is `{}`. */
async function body(ctx: Koa.Context, optional = false): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpProblem(413, 'payload_too_large', `the body must be at most ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '' && optional) return {};
  if (!ctx.is('application/json')) throw new HttpProblem(415, 'unsupported_media_type', 'the request body must be JSON (Content-Type: application/json)');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new HttpProblem(400, 'malformed_json', 'the request body is not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new HttpProblem(400, 'invalid_request', 'the request body must be a JSON object');
  return parsed as Record<string, unknown>;
}
