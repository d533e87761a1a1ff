import { HttpProblem } from './problem.js';

const UNRESERVED = /[A-Za-z0-9\-._~]/;
const HEX = /^[0-9A-Fa-f]{2}$/;
const DOUBLE_ENCODED = /%25(?:2e|2f|5c|25|00)/i;
const NEEDS_WORK = /[%\\]|\/\/|\/\./;

/**
 * One spelling per path, before routing, so no spelling reaches an upstream that the same checks
 * would not have let through: percent-encoded unreserved characters are decoded (`%2e` is `.`), other
 * escapes upper-cased, repeated slashes collapsed and dot segments resolved (RFC 3986 section 6.2.2).
 * Refused with 400: encoded slashes and backslashes, backslashes, NUL, bad escapes, double-encoded
 * dots, slashes or percent signs, `..;` segments, and `..` above the root.
 */
export function normalizePath(raw: string): string {
  if (!raw.startsWith('/')) throw invalidPath('the path must start with /');
  // Nearly every path is already canonical: nothing escaped, no backslash, no empty or dot segment.
  if (!NEEDS_WORK.test(raw)) return raw;
  const decoded = decodeUnreserved(raw);
  const out: string[] = [];
  const segments = decoded.split('/');
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    const last = i === segments.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..') {
        if (out.length === 0) throw invalidPath('the path climbs above the root');
        out.pop();
      }
      if (last) out.push('');
      continue;
    }
    if (segment === '' && !last) continue;
    // `..;x` is a dot segment to Tomcat-style servers (path parameters): refuse it rather than forward it.
    if (/^\.\.?(?:;|%3B)/i.test(segment)) throw invalidPath('the path contains a dot segment with parameters');
    out.push(segment);
  }
  return '/' + out.join('/');
}

function decodeUnreserved(raw: string): string {
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!;
    if (ch === '\\') throw invalidPath('the path contains a backslash');
    if (ch !== '%') {
      out += ch;
      continue;
    }
    const hex = raw.slice(i + 1, i + 3);
    if (!HEX.test(hex)) throw invalidPath('the path contains a malformed percent-escape');
    const code = parseInt(hex, 16);
    if (code === 0x2f || code === 0x5c) throw invalidPath('the path contains an encoded slash or backslash');
    if (code === 0) throw invalidPath('the path contains an encoded NUL');
    const decoded = String.fromCharCode(code);
    out += UNRESERVED.test(decoded) ? decoded : `%${hex.toUpperCase()}`;
    i += 2;
  }
  // Judged on the result, so `%25%32%65` (which decodes to `%2e`) is caught as well as `%252e`.
  if (DOUBLE_ENCODED.test(out)) throw invalidPath('the path contains a double-encoded character');
  return out;
}

function invalidPath(detail: string): HttpProblem {
  return new HttpProblem(400, 'invalid_path', detail);
}
