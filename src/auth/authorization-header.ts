/**
 * Strict parsing of `Authorization` (RFC 7235 / 7617 / 6750): exactly `<scheme> <credentials>`,
 * a known scheme (case-insensitive), token68 credentials. Basic: canonical base64 of UTF-8
 * `user:password`, split at the first colon, no control characters.
 */
export type Credentials =
  | { scheme: 'basic'; user: string; password: string }
  | { scheme: 'bearer'; token: string };

export type ParseResult = { ok: true; credentials: Credentials } | { ok: false; scheme: 'basic' | 'bearer' | 'unknown'; reason: string };

const HEADER = /^([A-Za-z]+) ([A-Za-z0-9\-._~+/]+=*)$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
// ignoreBOM: a leading byte-order mark stays part of the user name instead of vanishing silently.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function parseAuthorization(header: string): ParseResult {
  const m = HEADER.exec(header);
  if (!m) return { ok: false, scheme: schemeOf(header), reason: 'the Authorization header is malformed' };
  const scheme = m[1]!.toLowerCase();
  const value = m[2]!;
  if (scheme === 'bearer') return { ok: true, credentials: { scheme: 'bearer', token: value } };
  if (scheme === 'basic') return parseBasic(value);
  return { ok: false, scheme: 'unknown', reason: 'the Authorization scheme must be Basic or Bearer' };
}

export function parseBasic(value: string): ParseResult {
  const fail = (reason: string): ParseResult => ({ ok: false, scheme: 'basic', reason });
  if (!BASE64.test(value)) return fail('the Basic credentials are not valid base64');
  // One spelling per credential: padding bits must be zero (RFC 4648 section 3.5).
  if (!zeroPaddingBits(value)) return fail('the Basic credentials are not canonical base64');
  const bytes = Buffer.from(value, 'base64');
  // Printable ASCII (the common case) is its own UTF-8 and has no control characters to look for.
  const printable = isPrintableAscii(bytes);
  let decoded: string;
  if (printable) decoded = bytes.toString('latin1');
  else {
    try {
      decoded = utf8.decode(bytes);
    } catch {
      return fail('the Basic credentials are not valid UTF-8');
    }
  }
  const colon = decoded.indexOf(':');
  if (colon < 0) return fail('the Basic credentials lack the colon between user and password');
  const user = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (user === '') return fail('the Basic credentials have an empty user name');
  if (!printable && (CONTROL.test(user) || CONTROL.test(password))) return fail('the Basic credentials contain control characters');
  return { ok: true, credentials: { scheme: 'basic', user, password } };
}

/**
 * Whether the bits the padding leaves over in the last character are zero, for a string BASE64
 * matched: the one way it can differ from the canonical encoding of its bytes.
 */
function zeroPaddingBits(value: string): boolean {
  if (value.endsWith('==')) return (sextet(value.charCodeAt(value.length - 3)) & 0x0f) === 0;
  if (value.endsWith('=')) return (sextet(value.charCodeAt(value.length - 2)) & 0x03) === 0;
  return true;
}

/** The value of a base64 character (A-Z a-z 0-9 + /). */
function sextet(c: number): number {
  if (c >= 97) return c - 71; // a-z: 26..51
  if (c >= 65) return c - 65; // A-Z: 0..25
  if (c >= 48) return c + 4; // 0-9: 52..61
  return c === 43 ? 62 : 63; // + /
}

function isPrintableAscii(bytes: Buffer): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b < 0x20 || b > 0x7e) return false;
  }
  return true;
}

function schemeOf(header: string): 'basic' | 'bearer' | 'unknown' {
  const scheme = header.trimStart().split(/[ \t]/, 1)[0]!.toLowerCase();
  return scheme === 'basic' || scheme === 'bearer' ? scheme : 'unknown';
}
