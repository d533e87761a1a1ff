/** Paths the gateway serves itself, which routes and the forward-auth path may not take. */

/** The JWK Set of the identity assertions' keys (with identity.assertion configured). */
export const JWKS_PATH = '/.well-known/jwks.json';
