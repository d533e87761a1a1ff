import { DomainError } from './domain-error.js';

const UNRESERVED = /[A-Za-z0-9\-._~]/;
const HEX = /^[0-9A-Fa-f]{2}$/;
const DOUBLE_ENCODED = /%25(?:2e|2f|5c|25|00)/i;
const NEEDS_WORK = /[%\\]|\/\/|\/\./;

/**
 * One spelling per path, before routing, so no spelling reaches an upstream that the same checks
 * would not have let through: percent-encoded unreserved characters are decoded (`%2e` is `.`), other
 * escapes upper-cased, repeated slashes collapsed and dot segments resolved (RFC 3986 section 6.2.2).
 * Refused with 400: encoded slashes and backslashes, backslashes, NUL, bad escapes, double-encoded
 * dots, slashes or percent signs, `..;` segments, dot segments with trailing spaces (`..%20`), and `..`
 * above the root.
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
    // `..%20` is `..` to a server that drops a segment's trailing spaces (see withoutTrailingDotsAndSpaces).
    if (SPACED_DOT_SEGMENT.test(segment)) throw invalidPath('the path contains a dot segment with trailing spaces');
    out.push(segment);
  }
  return '/' + out.join('/');
}

/**
 * A normalized path as the servlet containers (Tomcat, Jetty, Spring's own matching) map it: each
 * segment's path parameters (`;` and what follows it in the segment, RFC 3986 section 3.3) dropped, and
 * the empty segments that leaves merged. `/api/admin;jsessionid=1/report` is their `/api/admin/report`,
 * while most other servers (Express, Go, nginx) read `admin;jsessionid=1` as the segment's name. Only a
 * literal `;` counts: `%3B` is data to every one of them. (normalizePath already refused `..;` and `.;`.)
 */
export function withoutPathParameters(path: string): string {
  const stripped = path.replace(/;[^/]*/g, '').replace(/\/{2,}/g, '/');
  return stripped === '' ? '/' : stripped;
}

/**
 * What IIS and ASP.NET drop at the end of a path segment, as Windows drops them from file names: dots and
 * spaces, and the other whitespace .NET trims (tab to carriage return, NEL, no-break space), as they stand
 * in a normalized path (a space can only come escaped: Node refuses a raw one in the request line).
 */
const SEGMENT_END = '(?:\\.|%20|%0[9A-D]|%C2%85|%C2%A0)';
const SEGMENT_END_RUN = new RegExp(`${SEGMENT_END}+(?=/|$)`, 'gi');
const ENDS_A_SEGMENT = new RegExp(`${SEGMENT_END}(?:/|$)`, 'i');
/** A dot segment with spaces after it (`..%20`, `.%20.`): dots and spaces only, a space among them. */
const SPACED_DOT_SEGMENT = new RegExp(`^\\.${SEGMENT_END}*(?:%20|%0[9A-D]|%C2%85|%C2%A0)${SEGMENT_END}*$`, 'i');

/** Whether a segment of a normalized path ends in a dot or a space (see withoutTrailingDotsAndSpaces). */
export function hasTrailingDotsOrSpaces(path: string): boolean {
  return ENDS_A_SEGMENT.test(path);
}

/**
 * A normalized path as IIS and ASP.NET map it: each segment's trailing dots and spaces (`admin.`,
 * `admin%20`, `admin.%20.`) dropped, and the empty segments that leaves merged. `/api/admin./report` is
 * their `/api/admin/report`, while most other servers read `admin.` as the segment's name. (normalizePath
 * already refused a dot segment with spaces after it, `..%20`, which one of them might read as `..`.)
 */
export function withoutTrailingDotsAndSpaces(path: string): string {
  const stripped = path.replace(SEGMENT_END_RUN, '').replace(/\/{2,}/g, '/');
  return stripped === '' ? '/' : stripped;
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

function invalidPath(detail: string): DomainError {
  return new DomainError('invalid_path', detail);
}

const ESCAPE = /%([0-9A-Fa-f]{2})/g;

/**
 * For a path another proxy forwards as it was written (a forward-auth description): the gateway cannot
 * make it canonical, so it judges only a path that already is. Returned unchanged when normalizePath
 * would return it unchanged and it has no `#`; otherwise 400, naming what is not canonical: dot
 * segments (`..`, `%2e%2e`), repeated slashes, a percent-escape of an unreserved character or in
 * lower case, and everything normalizePath refuses (encoded slashes, backslashes, bad escapes).
 * nginx and Caddy forward `/a/b/../../c` and `/a#/../c` as written, and upstreams read them their
 * own way, so judging any resolved spelling would judge a path other than the one served.
 */
export function requireNormalPath(raw: string): string {
  if (raw.includes('#')) throw invalidPath('the path contains # (a fragment is never part of a request)');
  const normal = normalizePath(raw);
  if (normal === raw) return raw;
  throw invalidPath(`the path is not in normal form: ${notNormal(raw)}; send it as ${normal.slice(0, 2048)}`);
}

function notNormal(raw: string): string {
  if (/\/\//.test(raw)) return 'it has repeated slashes';
  for (const [, hex] of raw.matchAll(ESCAPE)) {
    if (UNRESERVED.test(String.fromCharCode(parseInt(hex!, 16)))) return `%${hex} escapes an unreserved character`;
    if (hex !== hex!.toUpperCase()) return `%${hex} is not in upper case`;
  }
  return 'it has a dot segment (. or ..)';
}
