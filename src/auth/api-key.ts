import type { ApiKeysConfig } from '../config/types.js';
import { DomainError } from '../core/domain-error.js';
import type { Principal } from '../core/principal.js';
import { parseKey, type ApiKeyRecord, type ApiKeys, type PresentedKey } from '../stores/tables/api-keys.js';
import type { Authenticator } from './authenticator.js';
import { schemeMatcher } from './authenticator.js';

const isBearer = schemeMatcher('bearer');

/**
 * API keys of the store (`auth-gateway keys create`): `<prefix>_<id>_<secret>` in `apiKeys.header` or as
 * `Authorization: Bearer <key>`. Only keys of its own prefix are its credentials: any other bearer
 * credential is left to the token check. Verified against the SHA-256 the store keeps, from memory once
 * the key was used (ApiKeys.lookupNow: answered without a promise), else one store round trip; an
 * unknown, revoked or expired key, and a wrong secret of a key held in memory, take the same steps (a
 * store round trip among them) and get the same 401. The principal carries
 * the key's groups, and its routes, methods and rate as limits of its own.
 */
export function apiKeyAuthenticator(keys: ApiKeys, config: ApiKeysConfig): Authenticator<PresentedKey> {
  const header = config.header.toLowerCase();
  const bearerPrefix = `${config.prefix}_`;
  const refuse = () => new DomainError('credentials_not_accepted', 'the API key is unknown, revoked or expired');
  return {
    via: 'api_key',
    // Its credentials come in a header of their own (or as a bearer credential the token check leaves).
    scheme: undefined,
    header,
    // A bearer credential of its prefix is its own, and no other source's.
    form: { scheme: 'bearer', prefix: bearerPrefix },
    challenge: undefined,
    securityScheme: { name: 'apiKey', scheme: { type: 'apiKey', in: 'header', name: config.header, description: `An API key (\`${config.prefix}_<id>_<secret>\`, made by \`auth-gateway keys create\`), in this header or as \`Authorization: Bearer <key>\`.` } },
    parse(req) {
      const value = req.headers[header];
      if (value !== undefined) {
        // One credential per request: an Authorization header beside the key would reach a route that
        // forwards Authorization without the gateway having judged it.
        if (req.headers.authorization !== undefined) {
          throw new DomainError('invalid_request', `the request carries an API key (${config.header}) and an Authorization header: send one credential`);
        }
        return parsed(typeof value === 'string' ? value : undefined);
      }
      const authorization = req.headers.authorization;
      if (authorization === undefined || !isBearer(authorization)) return undefined;
      const token = bearerToken(authorization);
      if (token === undefined || !token.startsWith(bearerPrefix)) return undefined;
      return parsed(token);
    },
    verify(presented) {
      // A key answered from memory is accepted at once. Every refusal is decided on a store read, also
      // for an id this instance holds (a known id with a wrong secret): otherwise a refusal from memory
      // would be quicker than one for an id that does not exist, and timing would tell which ids do. The
      // first judgement runs either way (against the zero hash when nothing is held), so both refusals
      // run the same steps: one lookupNow, two judgements, one store read.
      const known = keys.lookupNow(presented.id) ?? null;
      if (keys.judge(known, presented) === undefined) return principalOf(known!);
      return keys.lookup(presented.id).then((record) => {
        if (keys.judge(record, presented) !== undefined) throw refuse();
        return principalOf(record!);
      });
    },
    async recheck(owner) {
      const id = owner.credential?.id;
      if (id === undefined) return 'not an API key';
      let record: ApiKeyRecord | null;
      try {
        record = await keys.lookup(id);
      } catch {
        // The store being down is no reason: open tunnels outlive a Redis blip.
        return undefined;
      }
      if (!record || record.sha256 !== owner.proof) return 'api key revoked';
      if (record.expiresAtMs !== undefined && record.expiresAtMs <= Date.now()) return 'api key expired';
      return undefined;
    },
  };

  /** The key in the header (one, of this prefix); anything else there is a malformed key, not accepted. */
  function parsed(text: string | undefined): PresentedKey {
    const key = text === undefined ? undefined : parseKey(text.trim(), config.prefix);
    if (key) return key;
    throw new DomainError('credentials_not_accepted', `the API key is malformed (one key of the form ${config.prefix}_<id>_<secret>)`);
  }

  /** The principal of a key judged usable. */
  function principalOf(r: ApiKeyRecord): Principal {
    return {
      user: r.user,
      via: 'api_key',
      groups: r.groups,
      // The key's own groups: an open tunnel is judged again by them, not by the groups file.
      ownGroups: true,
      sid: undefined,
      expiresAt: r.expiresAtMs === undefined ? undefined : Math.floor(r.expiresAtMs / 1000),
      ambient: false,
      proof: r.sha256,
      credential: { id: r.id, name: r.name, routes: r.routes, methods: r.methods, rate: r.rate },
    };
  }
}

/** The token of `Bearer <token>` (any case of the scheme, one space), else undefined. */
function bearerToken(header: string): string | undefined {
  const m = /^[A-Za-z]+ ([^\s]+)$/.exec(header);
  return m?.[1];
}

