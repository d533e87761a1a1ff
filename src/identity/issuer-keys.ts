import { createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import type { Clock } from '../clock.js';
import { isLoopback } from '../config/issuer-settings.js';
import type { IssuerAlg, IssuerConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { fetchFailure, getJson, providerCa } from './provider-fetch.js';
import { traced } from '../tracing/inner.js';

/** A provider's public key as the verifier uses it: the algorithms it may verify (pinned by its `alg` when it names one). */
export interface ProviderKey {
  kid: string | undefined;
  key: KeyObject;
  algs: readonly IssuerAlg[];
}

/** Counts each fetch of a provider's keys: `ok` or `error`. */
export type KeyFetchListener = (issuer: string, result: 'ok' | 'error') => void;

/** Bounds of a JWK Set's max-age, and the freshness without one. */
const MIN_MAX_AGE_S = 60;
const MAX_MAX_AGE_S = 86_400;
const DEFAULT_MAX_AGE_S = 300;
/** An unknown kid (or no keys) fetches the keys again at most this often per issuer. */
const REFETCH_INTERVAL_MS = 10_000;
/** A key set the provider could not replace stays usable this long after it was fetched, then none is known. */
const STALE_LIMIT_MS = 24 * 3600 * 1000;

/** No valid key of the issuer is known, and fetching them failed (or may not be tried yet). */
export class KeysUnavailable extends Error {
  constructor(readonly issuer: string, reason: string) {
    super(reason);
    this.name = 'KeysUnavailable';
  }
}

/**
 * One provider's signing keys: fetched from its JWK Set (the `jwks_uri` of its discovery document unless
 * configured), cached for the answer's max-age (bounded to 60 s…24 h, 300 s without one), then
 * refreshed in the background by the first request that finds them old, which is verified with the
 * cached keys without waiting. A token whose kid is unknown waits for one refetch, single-flight,
 * at most every 10 s. A failed fetch is logged and counted and keeps the cached keys (for up to 24 h
 * after they were fetched); with no usable key the issuer's tokens get 503, never a pass.
 */
export class IssuerKeys {
  readonly name: string;
  readonly issuer: string;
  private readonly ca: string[] | undefined;
  private keys: ProviderKey[] | undefined;
  private fetchedAt = 0;
  private freshUntil = 0;
  private jwksUri: string | undefined;
  private inflight: Promise<void> | undefined;
  private lastAttempt = Number.NEGATIVE_INFINITY;
  private lastError: string | undefined;
  /** JWK Set fetches made (successful or not): `config check --connect` and tests read it. */
  fetches = 0;
  /** Which key set is in use: one more with each successful fetch (a verified-token cache compares it). */
  generation = 0;

  constructor(readonly config: IssuerConfig, private readonly clock: Clock, private readonly log: Logger, private readonly onFetch: KeyFetchListener = () => {}, index = 0) {
    this.name = config.name;
    this.issuer = config.issuer;
    this.jwksUri = config.jwksUri;
    this.ca = providerCa(config.caFile, `identity.issuers[${index}].caFile`);
  }

  /** Starts the first fetch (at start and reload), so the first request rarely waits. */
  warm(): void {
    if (this.keys === undefined) void this.refresh().catch(() => {});
  }

  /**
   * The keys that may verify a token with this kid and alg: at once when the cached set has one (a set
   * past its max-age is refreshed in the background); else a promise after one refetch (single-flight,
   * throttled), empty when the provider does not know the kid either. Throws (or rejects with)
   * KeysUnavailable when no valid key is known.
   */
  keysFor(kid: string | undefined, alg: IssuerAlg): ProviderKey[] | Promise<ProviderKey[]> {
    const now = this.clock.now();
    if (this.usable(now)) {
      if (now >= this.freshUntil && now - this.lastAttempt >= REFETCH_INTERVAL_MS && !this.inflight) void this.refresh().catch(() => {});
      const found = select(this.keys!, kid, alg);
      if (found.length > 0) return found;
    }
    if (this.inflight || now - this.lastAttempt >= REFETCH_INTERVAL_MS) {
      return (this.inflight ?? this.refresh()).then(() => this.afterFetch(kid, alg), () => this.afterFetch(kid, alg));
    }
    return this.afterFetch(kid, alg);
  }

  /**
   * For a token verified before with the key set of `generation`: whether that set is still the one in
   * use and usable (a set past its max-age is refreshed in the background, as keysFor does). No: verify
   * it again.
   */
  stillValid(generation: number): boolean {
    const now = this.clock.now();
    if (!this.usable(now)) return false;
    if (now >= this.freshUntil && now - this.lastAttempt >= REFETCH_INTERVAL_MS && !this.inflight) void this.refresh().catch(() => {});
    return generation === this.generation;
  }

  /** After a fetch (or none allowed now): the keys, none for an unknown kid, or no valid keys at all. */
  private afterFetch(kid: string | undefined, alg: IssuerAlg): ProviderKey[] {
    if (!this.usable(this.clock.now())) throw new KeysUnavailable(this.issuer, this.lastError ?? 'its keys have not been fetched yet');
    return select(this.keys!, kid, alg);
  }

  private usable(now: number): boolean {
    return this.keys !== undefined && now < this.fetchedAt + STALE_LIMIT_MS;
  }

  /** Fetches the JWK Set (after discovery when its URL is not known yet); one at a time. */
  refresh(): Promise<void> {
    if (this.inflight) return this.inflight;
    this.lastAttempt = this.clock.now();
    const run = traced('jwks.fetch', { 'auth_gateway.issuer': this.name }, () => this.fetchKeys()).then(({ keys, maxAge }) => {
      this.keys = keys;
      this.generation++;
      this.fetchedAt = this.clock.now();
      this.freshUntil = this.fetchedAt + maxAge * 1000;
      this.lastError = undefined;
      this.onFetch(this.name, 'ok');
      this.log.debug('provider keys fetched', { issuer: this.name, keys: keys.length, maxAgeSeconds: maxAge });
    }, (err: unknown) => {
      this.lastError = `${this.name}: ${fetchFailure(err)}`;
      this.onFetch(this.name, 'error');
      this.log.warn('provider keys not fetched; the cached keys stay in use', {
        issuer: this.name, error: fetchFailure(err), cachedKeys: this.keys?.length ?? 0,
      });
      throw err;
    }).finally(() => {
      this.inflight = undefined;
    });
    this.inflight = run;
    return run;
  }

  /** The discovery document's `jwks_uri` (checked: the document names this issuer). */
  async discover(): Promise<{ jwksUri: string; document: Record<string, unknown> }> {
    const url = `${this.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const { body } = await getJson(url, this.ca);
    if (!isObject(body)) throw new Error(`${url} is not a JSON object`);
    if (body.issuer !== this.issuer) throw new Error(`${url} names the issuer ${JSON.stringify(body.issuer)}, not ${this.issuer}`);
    const jwksUri = body.jwks_uri;
    if (typeof jwksUri !== 'string' || !URL.canParse(jwksUri)) throw new Error(`${url} has no valid jwks_uri`);
    const u = new URL(jwksUri);
    if (u.protocol !== 'https:' && !(u.protocol === 'http:' && isLoopback(u.hostname))) throw new Error(`${url} names a jwks_uri that is neither https:// nor loopback http://`);
    this.jwksUri ??= jwksUri;
    return { jwksUri, document: body };
  }

  private async fetchKeys(): Promise<{ keys: ProviderKey[]; maxAge: number }> {
    if (this.jwksUri === undefined) await this.discover();
    this.fetches++;
    const { body, cacheControl } = await getJson(this.jwksUri!, this.ca);
    if (!isObject(body) || !Array.isArray(body.keys)) throw new Error(`${this.jwksUri} is not a JWK Set`);
    const keys = body.keys.flatMap((jwk) => providerKey(jwk, this.config.algorithms));
    if (keys.length === 0) throw new Error(`${this.jwksUri} has no signing key for ${this.config.algorithms.join(', ')}`);
    return { keys, maxAge: maxAgeOf(cacheControl) };
  }

  /** The time now, in milliseconds (the verifier's clock for exp and nbf). */
  now(): number {
    return this.clock.now();
  }

  /** The keys known now (for `config check --connect`). */
  known(): readonly ProviderKey[] {
    return this.keys ?? [];
  }

  /** The JWK Set URL in use, once known. */
  keysUrl(): string | undefined {
    return this.jwksUri;
  }
}

/** max-age of a Cache-Control header, bounded; no-store and no-cache count as the lower bound. */
export function maxAgeOf(cacheControl: string | undefined): number {
  if (!cacheControl) return DEFAULT_MAX_AGE_S;
  if (/(?:^|,)\s*no-(?:store|cache)\b/i.test(cacheControl)) return MIN_MAX_AGE_S;
  const m = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?/i.exec(cacheControl);
  if (!m) return DEFAULT_MAX_AGE_S;
  return Math.min(MAX_MAX_AGE_S, Math.max(MIN_MAX_AGE_S, Number(m[1])));
}

function select(keys: readonly ProviderKey[], kid: string | undefined, alg: IssuerAlg): ProviderKey[] {
  return keys.filter((k) => (kid === undefined || k.kid === kid) && k.algs.includes(alg));
}

/**
 * A JWK the verifier may use: a public signing key (use `sig` or none, key_ops with `verify` or none)
 * of RSA (at least 2048 bits), EC (P-256, P-384, P-521) or Ed25519, with the configured algorithms that
 * fit its type, only its own `alg` when it names one. Anything else is left out (symmetric keys always).
 */
export function providerKey(jwk: unknown, allowed: readonly IssuerAlg[]): ProviderKey[] {
  if (!isObject(jwk)) return [];
  if (jwk.use !== undefined && jwk.use !== 'sig') return [];
  if (Array.isArray(jwk.key_ops) && !jwk.key_ops.includes('verify')) return [];
  if (jwk.kty !== 'RSA' && jwk.kty !== 'EC' && jwk.kty !== 'OKP') return [];
  let key: KeyObject;
  try {
    // Only the public members: a private JWK published by mistake does not make a private key here.
    const { kty, n, e, crv, x, y } = jwk as Record<string, string>;
    key = createPublicKey({ key: { kty, n, e, crv, x, y } as JsonWebKey, format: 'jwk' });
  } catch {
    return [];
  }
  const fits = algsOfKey(key).filter((a) => allowed.includes(a));
  const algs = typeof jwk.alg === 'string' ? fits.filter((a) => a === jwk.alg) : fits;
  if (algs.length === 0) return [];
  return [{ kid: typeof jwk.kid === 'string' ? jwk.kid : undefined, key, algs }];
}

function algsOfKey(key: KeyObject): IssuerAlg[] {
  const d = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return (d.modulusLength ?? 0) >= 2048 ? ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'] : [];
    case 'ec':
      return d.namedCurve === 'prime256v1' ? ['ES256'] : d.namedCurve === 'secp384r1' ? ['ES384'] : d.namedCurve === 'secp521r1' ? ['ES512'] : [];
    case 'ed25519':
      return ['EdDSA'];
    default:
      return [];
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
