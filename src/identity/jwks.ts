import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import type { AssertionKeys } from './assertion-keys.js';

export { JWKS_PATH } from '../config/authz-settings.js';
/**
 * How long a verifier may cache the set. Rotation waits this long between publishing a new key and
 * signing with it, and keeps a retired key published for ttlSeconds + this (docs/authorization.md).
 */
export const JWKS_MAX_AGE_SECONDS = 300;

/** The JWK Set document (RFC 7517 section 5) and its entity tag. */
export function jwksDocument(keys: AssertionKeys): { body: string; etag: string } {
  const body = JSON.stringify({ keys: keys.published.map((k) => k.jwk) });
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/**
 * GET/HEAD /.well-known/jwks.json without credentials (an own endpoint): the public halves of the
 * assertion keys, with Cache-Control and an ETag (If-None-Match gets 304).
 */
export function serveJwks(keys: AssertionKeys): (ctx: Context) => void {
  const { body, etag } = jwksDocument(keys);
  return function jwks(ctx) {
    ctx.set('Cache-Control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
    ctx.set('ETag', etag);
    if (ctx.get('if-none-match').split(',').some((t) => t.trim() === etag || t.trim() === `W/${etag}`)) {
      ctx.status = 304;
      return;
    }
    ctx.type = 'application/jwk-set+json';
    ctx.body = body;
  };
}
