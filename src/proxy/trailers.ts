import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { IncomingHttpHeaders as Http2Headers } from 'node:http2';
import { REMOVED_HEADERS } from '../core/header-table.js';

/**
 * Fields never passed on in trailers or early hints, either way: hop-by-hop and connection-specific
 * ones, framing, and every name of the one table of removed headers (REMOVED_HEADERS): a trailer must
 * not carry what the header policy removes from a head (an `X-Authenticated-User` or `Authorization`
 * sent after the body is the same lie or the same credential).
 */
const NEVER = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate',
  'transfer-encoding', 'content-length', 'host', 'http2-settings', 'expect',
  ...REMOVED_HEADERS.filter((h) => !h.family).map((h) => h.name),
]);
/** The table's families, by prefix. */
const FAMILIES = REMOVED_HEADERS.filter((h) => h.family).map((h) => h.name);

/** Whether a trailer (or early hint) field may pass: `name` in any case, `_` read as `-` (as CGI-style upstreams do). */
export function isPassedField(name: string): boolean {
  if (name.charCodeAt(0) === 0x3a) return false;
  let n = name.toLowerCase();
  if (n.includes('_')) n = n.replace(/_/g, '-');
  if (NEVER.has(n)) return false;
  for (const prefix of FAMILIES) if (n.startsWith(prefix)) return false;
  return true;
}

/** The fields passed on (see isPassedField); undefined when none is left. */
export function passedTrailers(trailers: IncomingHttpHeaders | Http2Headers | undefined): OutgoingHttpHeaders | undefined {
  if (!trailers) return undefined;
  let out: OutgoingHttpHeaders | undefined;
  for (const name of Object.keys(trailers)) {
    const value = trailers[name];
    if (value === undefined || !isPassedField(name)) continue;
    (out ??= {})[name] = value;
  }
  return out;
}

/** An upstream's `Trailer` announcement without the names that will not pass; undefined when none is left. */
export function announcedTrailers(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const names = value.split(',').map((n) => n.trim()).filter((n) => n !== '' && isPassedField(n));
  return names.length > 0 ? names.join(', ') : undefined;
}

/** `TE` asks for trailers (the header policy removes TE as hop-by-hop; the gateway sets `TE: trailers` itself). */
export function asksForTrailers(te: string | string[] | undefined): boolean {
  return typeof te === 'string' && /(?:^|,)\s*trailers\s*(?:;|,|$)/i.test(te);
}
