import { compileAllow, type AllowRule } from '../authz/allow-rule.js';
import type { CorsPolicy, PagingRules, RateLimitRule, RouteConfig, Timeouts, UpstreamConfig } from '../config/types.js';

export interface Route {
  path: string;
  /** undefined: a forward-auth-only route (matched for its rules, never forwarded to). */
  upstream: string | undefined;
  /** Who may use the route; undefined: every authenticated user. */
  allow: AllowRule | undefined;
  /** The `aud` of identity assertions on this route. */
  audience: string;
  forwardAuthorization: boolean;
  stripPrefix: boolean;
  timeouts: Timeouts;
  allowHeaders: readonly string[];
  paging: PagingRules | undefined;
  /** The limit in force on this route (its own, else the global one), if any. */
  rateLimit: RateLimitRule | undefined;
  /** WebSocket upgrades are proxied (the default) or refused. */
  websocket: boolean;
  /** The route's CORS, if any. */
  cors: CorsPolicy | undefined;
  /** Browser navigations without credentials are sent to sign in (routes[].login). */
  login: boolean;
}

/**
 * Longest path prefix wins, on a segment boundary: /v1/contacts matches /v1/contacts and
 * /v1/contacts/phoneNumber, never /v1/contactsX. One map lookup per segment of the request path.
 *
 * Matched without regard to ASCII case, as Express, ASP.NET and IIS route: `/api/ADMIN/report` gets the
 * `/api/admin` route (its allow rules, paging and limits), not a catch-all `/api` whose upstream would
 * serve the admin's page all the same. The request keeps its spelling; a stripped prefix is cut by
 * the route path's length (case folding keeps the length: route paths are ASCII).
 */
export class RouteTable {
  private readonly byPath = new Map<string, Route>();

  constructor(routes: RouteConfig[], upstreams: Record<string, UpstreamConfig>, globalRateLimit?: RateLimitRule) {
    for (const r of routes) {
      if (r.upstream !== undefined && !upstreams[r.upstream]) throw new Error(`route ${r.path} names unknown upstream ${r.upstream}`);
      const rateLimit = r.rateLimit === null ? undefined : r.rateLimit ?? globalRateLimit;
      this.byPath.set(foldCase(r.path), {
        path: r.path, upstream: r.upstream, forwardAuthorization: r.forwardAuthorization, stripPrefix: r.stripPrefix,
        timeouts: r.timeouts, allowHeaders: r.allowHeaders, paging: r.paging, rateLimit,
        websocket: r.websocket !== false, cors: r.cors, login: r.login === true,
        allow: r.allow ? compileAllow(r.allow) : undefined, audience: r.audience ?? r.upstream ?? r.path,
      });
    }
  }

  /** Whether any route has a CORS policy (when none has, CORS need not look routes up at all). */
  get anyCors(): boolean {
    for (const route of this.byPath.values()) if (route.cors) return true;
    return false;
  }

  /** The route of a normalized path, or undefined. */
  match(path: string): Route | undefined {
    const folded = foldCase(path);
    let prefix = folded.endsWith('/') && folded.length > 1 ? folded.slice(0, -1) : folded;
    for (;;) {
      const route = this.byPath.get(prefix);
      if (route) return route;
      const cut = prefix.lastIndexOf('/');
      if (cut <= 0) return undefined;
      prefix = prefix.slice(0, cut);
    }
  }
}

const UPPER = /[A-Z]/;
/** Anything but printable ASCII, which toLowerCase could change beyond its letters. */
const NOT_PRINTABLE_ASCII = /[^ -~]/;

/**
 * ASCII letters in lower case, nothing else changed (so the length stays). A path of printable ASCII (a
 * gRPC method's `/pkg.Service/Method` on every call) is lowered in one native call; only a path with other
 * characters, which toLowerCase could change too, takes the letter-by-letter way.
 */
function foldCase(path: string): string {
  if (!UPPER.test(path)) return path;
  return NOT_PRINTABLE_ASCII.test(path) ? path.replace(/[A-Z]+/g, (s) => s.toLowerCase()) : path.toLowerCase();
}
