import { sign, type KeyObject } from 'node:crypto';
import { lowSEs256 } from './ecdsa.js';
import type { Clock } from '../clock.js';
import type { AssertionAlg, AssertionKeys } from './assertion-keys.js';

/** Who an assertion speaks for, and to which upstream. */
export interface AssertionSubject {
  user: string;
  via: string;
  groups: readonly string[];
  audience: string;
  /** The x5t#S256 thumbprint of the client certificate of the request's connection (RFC 8705 `cnf`). */
  certificate?: string | undefined;
}

export interface AssertionOptions {
  issuer: string;
  ttlSeconds: number;
  /** Cached assertions kept at most (the oldest go first). */
  maxCached?: number;
}

const DEFAULT_MAX_CACHED = 10_000;

/**
 * Signs identity assertions: compact JWS (RFC 7515) with `iss`, `sub`, `aud`, `groups`, `via`, `iat`,
 * `exp`, the signing key's `kid` and, for a request over a verified client certificate, `cnf` with its
 * `x5t#S256` (RFC 8705). One assertion serves every request of the same user, via, groups
 * and audience until shortly before it expires (a sixth of its lifetime, at least 2 and at most 10 s,
 * is left when it is replaced), so a request costs a Map lookup, not a signature. The cache is bounded.
 */
export class AssertionSigner {
  private readonly cache = new Map<string, { token: string; exp: number }>();
  private readonly header: string;
  private readonly marginSeconds: number;
  private readonly maxCached: number;

  constructor(private readonly keys: AssertionKeys, private readonly options: AssertionOptions, private readonly clock: Clock) {
    this.header = b64(JSON.stringify({ alg: keys.alg, typ: 'JWT', kid: keys.signing.kid }));
    this.marginSeconds = Math.min(10, Math.max(2, Math.floor(options.ttlSeconds / 6)));
    this.maxCached = options.maxCached ?? DEFAULT_MAX_CACHED;
  }

  get kid(): string {
    return this.keys.signing.kid;
  }

  assertion(s: AssertionSubject): string {
    const now = Math.floor(this.clock.now() / 1000);
    const key = `${s.user}\0${s.via}\0${s.audience}\0${s.certificate ?? ''}\0${s.groups.join('\0')}`;
    const cached = this.cache.get(key);
    if (cached && cached.exp - now > this.marginSeconds) return cached.token;
    const exp = now + this.options.ttlSeconds;
    const cnf = s.certificate === undefined ? undefined : { 'x5t#S256': s.certificate };
    const token = this.sign({ iss: this.options.issuer, sub: s.user, aud: s.audience, groups: s.groups, via: s.via, cnf, iat: now, exp });
    if (cached) this.cache.delete(key);
    else if (this.cache.size >= this.maxCached) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(key, { token, exp });
    return token;
  }

  private sign(claims: Record<string, unknown>): string {
    const input = `${this.header}.${b64(JSON.stringify(claims))}`;
    return `${input}.${signature(this.keys.alg, input, this.keys.signing.key).toString('base64url')}`;
  }
}

function signature(alg: AssertionAlg, input: string, key: KeyObject): Buffer {
  const data = Buffer.from(input);
  if (alg === 'EdDSA') return sign(null, data, key);
  // JWS wants r || s, not DER (RFC 7518 section 3.4).
  // The low-S spelling, the one the gateway itself accepts (and strict verifiers demand): OpenSSL gives either.
  if (alg === 'ES256') return lowSEs256(sign('sha256', data, { key, dsaEncoding: 'ieee-p1363' }));
  return sign('sha256', data, key);
}

function b64(s: string): string {
  return Buffer.from(s).toString('base64url');
}
