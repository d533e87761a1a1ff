import type { Checker } from './checker.js';
import { childrenOf } from './defaults.js';
import { readScalars } from './sections.js';
import type { ApiKeysConfig } from './types.js';

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers the key header must not be: the gateway reads, sets or strips these for other purposes. */
const RESERVED = new Set([
  'authorization', 'proxy-authorization', 'cookie', 'host', 'connection', 'upgrade', 'content-length', 'transfer-encoding', 'expect',
  'x-authenticated-user', 'x-authenticated-via', 'x-authenticated-groups', 'x-request-id', 'x-identity-assertion',
  'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded',
]);

/** `apiKeys`: absent, null or false for none; `true` or a mapping for keys (see docs/service-credentials.md). */
export function readApiKeys(c: Checker, raw: unknown): ApiKeysConfig | undefined {
  if (raw === undefined || raw === null || raw === false) return undefined;
  const a = c.obj('apiKeys', raw === true ? {} : raw);
  c.unknownKeys('apiKeys', a, childrenOf('apiKeys'));
  const keys = readScalars(c, 'apiKeys', a);
  const { header, prefix } = keys;
  if (!TOKEN.test(header)) c.problem('apiKeys.header', 'must be a header name');
  else if (header.includes('_')) c.problem('apiKeys.header', 'must not contain _ (proxies and the gateway read _ and - alike in header names, so the _ spelling would slip past the removal)');
  else if (RESERVED.has(header.toLowerCase())) c.problem('apiKeys.header', `must not be ${header} (the gateway reads, sets or removes it for another purpose; a key in Authorization: Bearer is accepted anyway)`);
  if (!/^[a-z][a-z0-9]{1,15}$/.test(prefix)) c.problem('apiKeys.prefix', 'must be 2 to 16 lower-case letters and digits, starting with a letter (keys look like <prefix>_<id>_<secret>)');
  return keys;
}
