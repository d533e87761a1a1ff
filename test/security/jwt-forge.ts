import { createHmac, sign as cryptoSign, type KeyObject } from 'node:crypto';

/**
 * Hand-made JWS compact tokens for attack tests. jsonwebtoken refuses to produce most of these
 * (`alg: none` with a kid, HS256 keyed with a PEM public key, missing claims), so they are built here
 * byte by byte, exactly as an attacker would.
 */
export type JwtHeader = Record<string, unknown>;
export type JwtPayload = Record<string, unknown>;

export type Signer =
  | { alg: 'none' }
  /** HMAC-SHA256 with any bytes as the key: a secret, or a public key's PEM (key confusion). */
  | { alg: 'HS256'; secret: string | Buffer }
  | { alg: 'RS256'; privateKey: KeyObject };

export function b64url(data: string | Buffer): string {
  return Buffer.from(data).toString('base64url');
}

export function encodeJson(value: unknown): string {
  return b64url(JSON.stringify(value));
}

/** header.payload.signature; for `none` the signature is empty. */
export function forge(header: JwtHeader, payload: JwtPayload, signer: Signer): string {
  return forgeRaw(encodeJson(header), encodeJson(payload), signer);
}

/** Signs already-encoded parts (to sign a header that is not JSON, for instance). */
export function forgeRaw(headerPart: string, payloadPart: string, signer: Signer): string {
  const input = `${headerPart}.${payloadPart}`;
  return `${input}.${signature(input, signer)}`;
}

function signature(input: string, signer: Signer): string {
  switch (signer.alg) {
    case 'none':
      return '';
    case 'HS256':
      return createHmac('sha256', signer.secret).update(input).digest('base64url');
    case 'RS256':
      return cryptoSign('sha256', Buffer.from(input), signer.privateKey).toString('base64url');
  }
}

export interface DecodedJwt {
  header: JwtHeader;
  payload: JwtPayload;
  parts: [string, string, string];
}

/** Decodes without verifying (the attacker's view of a token it was given). */
export function decodeJwt(token: string): DecodedJwt {
  const parts = token.split('.');
  if (parts.length !== 3) throw new Error(`not a JWS compact token: ${token.slice(0, 40)}`);
  const json = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
  return { header: json(parts[0]!), payload: json(parts[1]!), parts: parts as [string, string, string] };
}

/** Seconds since the epoch, as JWT claims count them. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
