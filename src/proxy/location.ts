/** What a redirect from an upstream is translated with. */
export interface LocationMap {
  /** `scheme://host:port` of the upstream, as it appears in its own absolute URLs. */
  upstreamOrigin: string;
  /** The upstream URL's own path ('' or e.g. `/base`), without a trailing slash. */
  upstreamBasePath: string;
  /** `scheme://host[:port]` the client used; undefined when its Host was missing or unusable. */
  clientOrigin: string | undefined;
  /** The route prefix the gateway stripped before forwarding (stripPrefix), else undefined. */
  routePrefix: string | undefined;
}

/**
 * A Location (or Content-Location) value as the client must see it, like nginx's `proxy_redirect
 * default`: an absolute URL on the upstream's own origin becomes one on the client-facing origin (it
 * would otherwise reveal the internal address and send `curl -L` past authentication), and with a
 * stripped prefix the upstream's base path maps back to the route's. URLs on other origins and relative
 * references other than absolute paths are left as they are.
 */
export function rewriteLocation(value: string, map: LocationMap): string {
  if (value.startsWith('/') && !value.startsWith('//')) return mapPath(value, map);
  const m = /^(https?:\/\/[^/?#]*)(.*)$/is.exec(value);
  if (!m) return value;
  let origin: string;
  try {
    // Normalizes case and a default port, as the upstream's own origin was.
    origin = new URL(m[1]!).origin;
  } catch {
    return value;
  }
  if (origin !== map.upstreamOrigin) return value;
  return (map.clientOrigin ?? '') + mapPath(m[2] || '/', map);
}

function mapPath(path: string, map: LocationMap): string {
  if (map.routePrefix === undefined || !path.startsWith(map.upstreamBasePath)) return path;
  const rest = path.slice(map.upstreamBasePath.length);
  // `/basement` is not under `/base`.
  if (rest !== '' && !'/?#'.includes(rest[0]!)) return path;
  return map.routePrefix + rest;
}
