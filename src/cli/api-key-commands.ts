import { ConfigError } from '../config/config-error.js';
import { setting } from '../config/defaults.js';
import type { Config } from '../config/types.js';
import { silentLogger } from '../log.js';
import { readKeySpec, parseDuration } from '../stores/tables/api-key-spec.js';
import { ApiKeys, type ApiKeyInfo, type ApiKeyRecord } from '../stores/tables/api-keys.js';
import { createTable } from '../stores/kinds.js';
import { InputError, StoreUnreachableError, UsageError } from './command-errors.js';

type Options = Partial<Record<string, string | boolean>>;

/** What a key command printed: the output, and a note for stderr (the key itself goes to stdout alone). */
export interface KeysOutput {
  stdout: string;
  stderr?: string;
}

/** `keys create|list|revoke|rotate` against the shared store's keys. */
export async function keysCommand(command: string, args: string[], options: Options, config: Config): Promise<KeysOutput> {
  const prefix = config.apiKeys?.prefix ?? String(setting('apiKeys.prefix').default);
  const notice = config.apiKeys ? undefined : 'warning: apiKeys is not set in this configuration; the gateway accepts no key until it is';
  const opt = (name: string) => (typeof options[name] === 'string' ? (options[name] as string) : undefined);
  switch (command) {
    case 'keys create': {
      const { spec, problems } = readKeySpec({
        name: opt('name'), user: opt('user'), groups: opt('groups'), routes: opt('routes'), methods: opt('methods'), expiresIn: opt('expires-in'), rate: opt('rate'),
      });
      if (problems.length > 0) throw new UsageError(problems.join('; '), command);
      const { record, key } = await withKeys(config, (keys) => keys.create(spec, prefix));
      return { stdout: key, stderr: join(`created key ${record.id} (${record.name}) for user "${record.user}"; it is shown this once: the store keeps only its SHA-256`, notice) };
    }
    case 'keys list': {
      const keys = await withKeys(config, (k) => k.list());
      return { stdout: describeKeys(keys), stderr: notice };
    }
    case 'keys revoke': {
      const old = await withKeys(config, (keys) => keys.revoke(args[0]!));
      if (!old) throw noSuchKey(args[0]!);
      return { stdout: `revoked key ${old.id} (${old.name}); no instance accepts it any more` };
    }
    case 'keys rotate': {
      const overlapText = opt('overlap') ?? '0';
      const overlap = overlapText === '0' ? 0 : parseDuration(overlapText);
      if (overlap === undefined) throw new UsageError(`--overlap "${overlapText}" must be a duration such as 24h, 30m or 0`, command);
      const rotated = await withKeys(config, (keys) => keys.rotate(args[0]!, overlap, prefix));
      if (!rotated) throw noSuchKey(args[0]!);
      const until = overlap === 0 ? 'the old one is revoked' : `the old one (${rotated.old.id}) works until ${iso(rotated.old.expiresAtMs)}`;
      return { stdout: rotated.key, stderr: join(`rotated key ${args[0]} (${rotated.record.name}) to ${rotated.record.id}; ${until}; the new key is shown this once`, notice) };
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

/** An id the store has no key under: the file is fine, the id is not. */
function noSuchKey(id: string): InputError {
  return new InputError('no such key', `there is no key ${id} (keys list shows them); nothing was changed`);
}

/** Runs `work` on the keys of the shared store (store.kind redis: the memory store lives inside one gateway). */
async function withKeys<T>(config: Config, work: (keys: ApiKeys) => Promise<T>): Promise<T> {
  if (config.store.kind === 'memory') {
    throw new ConfigError([`${config.file || 'the configuration'}: store.kind is memory, which lives inside the gateway process; this command needs the shared store (store.kind: redis), or the admin API (admin.apiToken)`]);
  }
  const table = createTable<ApiKeyRecord>('apikeys', config.store, silentLogger);
  try {
    if (!(await table.waitUntilReady(config.store.connectTimeoutMs))) {
      throw new StoreUnreachableError(`the store did not answer within store.connectTimeoutMs (${config.store.connectTimeoutMs} ms); nothing was changed`);
    }
    return await work(new ApiKeys(table));
  } finally {
    await table.close();
  }
}

/** One line a key; never a secret or a hash. */
function describeKeys(keys: ApiKeyInfo[]): string {
  if (keys.length === 0) return 'no API keys';
  const now = Date.now();
  const rows = keys.map((k) => [
    k.id, k.name, k.user, k.groups.join(',') || '-', k.routes.join(',') || '*', k.methods.join(',') || '*',
    k.rate ? `${k.rate.requests}/${k.rate.windowSeconds}s` : '-',
    k.expiresAtMs === undefined ? 'never' : `${iso(k.expiresAtMs)}${k.expiresAtMs <= now ? ' (expired)' : ''}`,
    iso(k.createdAtMs), k.lastUsedAtMs === undefined ? 'never' : iso(k.lastUsedAtMs), k.rotatedTo ?? '-',
  ]);
  const head = ['id', 'name', 'user', 'groups', 'routes', 'methods', 'rate', 'expires', 'created', 'last used', 'rotated to'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

function iso(ms: number | undefined): string {
  return ms === undefined ? '-' : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function join(...lines: Array<string | undefined>): string {
  return lines.filter((l) => l !== undefined).join('\n');
}
