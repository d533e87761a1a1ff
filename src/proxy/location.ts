/** What a redirect from an upstream is translated with. */
export interface LocationMap {
  /** `scheme://host:port` of each of the upstream's targets, as they appear in their own absolute URLs. */
  upstreamOrigins: readonly string[];
  /** The answering target's own path ('' or e.g. `/base`), without a trailing slash. */
  upstreamBasePath: string;
  /** The route prefix the gateway stripped before forwarding (stripPrefix), else undefined. */
  routePrefix: string | undefined;
}

/** A scheme (`http:`, `HTTP:`), or two slashes or backslashes in any mix: a reference that names an authority. */
const NAMES_AUTHORITY = /^(?:[A-Za-z][A-Za-z0-9+.-]*:|[/\\]{2})/;

/**
 * A Location (or Content-Location) value as the client must see it, in the spirit of nginx's
 * `proxy_redirect default`. A URL on the upstream's own origin would reveal the internal address and
 * send `curl -L` past authentication: it becomes a path on the gateway, an origin-relative reference the
 * client resolves against the origin it used. So no client-sent host is needed (a spoofed
 * X-Forwarded-Host cannot make it an open redirect), and the path never starts with `//` or `/\`. Values
 * are read as a browser reads them (`//host/x`, `http:\\host\x`, `http:/host/x` name the host too). With
 * a stripped prefix the upstream's base path maps back to the route's. URLs on other origins and
 * relative references (`x/y`, `?q`) are left as they are.
 */
export function rewriteLocation(value: string, map: LocationMap): string {
  if (value.startsWith('/') && !/^\/[/\\]/.test(value)) return onePath(mapPath(value, map));
  if (!NAMES_AUTHORITY.test(value)) return value;
  let url: URL;
  try {
    // Parsed as a browser would (WHATWG: backslashes, a missing slash, case, a default port). A value
    // with a scheme stands on its own (`http:/host/x` is that host to a client on another scheme).
    url = /^[A-Za-z][A-Za-z0-9+.-]*:/.test(value) ? new URL(value) : new URL(value, `${map.upstreamOrigins[0]}/`);
  } catch {
    return value;
  }
  if (!map.upstreamOrigins.includes(url.origin)) return value;
  return onePath(mapPath(url.pathname + url.search + url.hash, map));
}

function mapPath(path: string, map: LocationMap): string {
  if (map.routePrefix === undefined || !path.startsWith(map.upstreamBasePath)) return path;
  const rest = path.slice(map.upstreamBasePath.length);
  // `/basement` is not under `/base`.
  if (rest !== '' && !'/?#'.includes(rest[0]!)) return path;
  return map.routePrefix + rest;
}

/** Exactly one leading slash: `//evil.example/x` from an upstream must not leave as a protocol-relative URL. */
function onePath(path: string): string {
  return `/${path.replace(/^[/\\]+/, '')}`;
}
