import type { Checker } from './checker.js';
import { childrenOf, numberDefault, setting } from './defaults.js';
import type { IssuerAlg, IssuerConfig } from './types.js';

/** `identity.issuers`: the OpenID providers whose bearer tokens are accepted (docs/openid.md). */

const ALGS = setting('identity.issuers[].algorithms').values as readonly IssuerAlg[];
const DEFAULT_ALGS = setting('identity.issuers[].algorithms').default as readonly IssuerAlg[];
const NAME = /^[A-Za-z0-9._-]+$/;
const CLAIM_PATH = /^[^.\s]+(?:\.[^.\s]+)*$/;

/** `identity.issuers`: absent, null or an empty list for none. */
export function readIssuers(c: Checker, raw: unknown, at: (p: string) => string): IssuerConfig[] {
  const names = new Set<string>();
  const issuers = new Set<string>();
  return c.list('identity.issuers', raw).map((value, i) => {
    const key = `identity.issuers[${i}]`;
    const e = c.obj(key, value, true);
    c.unknownKeys(key, e, childrenOf('identity.issuers[]'));
    const name = c.str(`${key}.name`, e.name);
    if (name && !NAME.test(name)) c.problem(`${key}.name`, 'must be letters, digits, ., _ or - (it labels logs and metrics)');
    else if (names.has(name)) c.problem(`${key}.name`, `repeats ${name}`);
    names.add(name);
    const issuer = providerUrl(c, `${key}.issuer`, e.issuer);
    if (issuer && issuers.has(issuer)) c.problem(`${key}.issuer`, `repeats ${issuer} (a token's iss names one provider)`);
    issuers.add(issuer);
    const jwksUri = e.jwksUri === undefined || e.jwksUri === null ? undefined : providerUrl(c, `${key}.jwksUri`, e.jwksUri);
    const audiences = c.list(`${key}.audiences`, e.audiences).map((a, j) => c.str(`${key}.audiences[${j}]`, a));
    if (audiences.length === 0 && !(Array.isArray(e.audiences) && e.audiences.length > 0)) {
      c.problem(`${key}.audiences`, 'is required: the aud values of tokens meant for this gateway (a token for another API must not pass)');
    }
    const algorithms = e.algorithms === undefined || e.algorithms === null
      ? [...DEFAULT_ALGS]
      : c.list(`${key}.algorithms`, e.algorithms).map((a, j) => {
        const alg = typeof a === 'string' ? a : '';
        if (/^HS/i.test(alg) || alg.toLowerCase() === 'none') {
          c.problem(`${key}.algorithms[${j}]`, `is ${alg}: only asymmetric algorithms are accepted from a provider (${ALGS.join(', ')})`);
          return 'RS256';
        }
        return c.oneOf(`${key}.algorithms[${j}]`, a, ALGS, 'RS256');
      });
    if (Array.isArray(e.algorithms) && e.algorithms.length === 0) c.problem(`${key}.algorithms`, 'must name at least one algorithm');
    const userClaim = claimPath(c, `${key}.userClaim`, e.userClaim, String(setting('identity.issuers[].userClaim').default));
    const groupsClaim = e.groupsClaim === undefined || e.groupsClaim === null ? undefined : claimPath(c, `${key}.groupsClaim`, e.groupsClaim);
    const caFile = e.caFile === undefined || e.caFile === null || e.caFile === '' ? undefined : at(c.str(`${key}.caFile`, e.caFile));
    const skew = setting('identity.issuers[].clockSkewSeconds');
    return {
      name,
      issuer,
      jwksUri,
      audiences,
      algorithms: [...new Set(algorithms)],
      userClaim,
      groupsClaim,
      caFile,
      clockSkewSeconds: c.int(`${key}.clockSkewSeconds`, e.clockSkewSeconds, numberDefault('identity.issuers[].clockSkewSeconds'), skew.min, skew.max),
    };
  });
}

/** `the groupsClaim of <name>` when an entry of `identity.issuers` (as written) has one: allow rules may name groups. */
export function groupsClaimOf(identity: unknown): string | undefined {
  const issuers = (identity as { issuers?: unknown } | null | undefined)?.issuers;
  if (!Array.isArray(issuers)) return undefined;
  const entry = issuers.find((e): e is { name?: unknown; groupsClaim: string } => typeof (e as { groupsClaim?: unknown } | null)?.groupsClaim === 'string');
  return entry ? `the groupsClaim of ${String(entry.name)}` : undefined;
}

/** An https URL, or http on a loopback address (a provider in the same host or pod). */
function providerUrl(c: Checker, key: string, value: unknown): string {
  const url = c.url(key, value, ['https:', 'http:']);
  if (url && URL.canParse(url)) {
    const u = new URL(url);
    if (u.protocol === 'http:' && !isLoopback(u.hostname)) c.problem(key, 'must be https:// (http:// only on a loopback address: 127.0.0.1, [::1], localhost)');
    if (u.hash) c.problem(key, 'must not have a #fragment');
  }
  return url;
}

export function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || hostname === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

function claimPath(c: Checker, key: string, value: unknown, fallback?: string): string {
  const path = c.str(key, value, fallback);
  if (path && !CLAIM_PATH.test(path)) c.problem(key, 'must be a claim name or a dotted path (realm_access.roles)');
  return path;
}
