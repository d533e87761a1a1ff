/**
 * Every setting of the configuration file: its type, its default and what it means, one entry per key
 * path. Validation (validate.ts) takes defaults, bounds and the known keys from here, and
 * docs/configuration.md is generated from it (`npm run docs:config`), so the reference cannot drift from
 * the code. `<name>` stands for any upstream name, `[]` for any list index.
 *
 * To add a setting: add its entry here (in the order it should appear in the reference). A plain one
 * (integer, boolean, string, path, secret, enumeration) is then typed and read by itself: its section's
 * type is `Scalars<'section'>` and its reader calls `readScalars` (sections.ts). Lists, mappings and
 * settings of two types are read by hand in validate.ts. Then run `npm run docs:config` and commit the
 * regenerated reference.
 */
export interface Setting {
  /** As shown in the reference: `integer`, `string`, `boolean`, `url`, `path`, `list`, `mapping`, or the allowed values. */
  type: string;
  /** The value used when the key is absent; undefined: required, or none (see `defaultText`). */
  default?: string | number | boolean | readonly (string | number)[];
  /** How the reference shows the default when it is not a plain value (`none`, `required`, `1 with Sentinel, else 0`). */
  defaultText?: string;
  /** Bounds of an integer, inclusive. */
  min?: number;
  max?: number;
  /** The allowed values of an enumeration. */
  values?: readonly string[];
  /** A file (or its section, when present) without it is refused. */
  required?: true;
  /** One line: what it does. */
  meaning: string;
}

export const SETTINGS = {
  // server
  'server': { type: 'mapping', defaultText: 'all defaults', meaning: 'The public listener.' },
  'server.host': { type: 'string', default: '0.0.0.0', meaning: 'Listen address.' },
  'server.port': { type: 'integer', default: 8080, min: 0, max: 65535, meaning: 'Listen port (`PORT` overrides it).' },
  'server.trustProxy': { type: 'boolean or integer', default: 0, min: 0, max: 32, defaultText: '`false`', meaning: '`false`/`0`: the client address is the TCP peer and client-sent `X-Forwarded-*` are discarded. `true`/`N`: N reverse proxies in front are trusted; the address is the entry the nearest trusted proxy added, and the incoming `X-Forwarded-*` chain is kept and appended to.' },
  'server.shutdownGraceMs': { type: 'integer', default: 10_000, min: 0, meaning: 'On SIGTERM/SIGINT, in-flight requests get this long to finish.' },
  'server.acceptGraceMs': { type: 'integer', default: 5000, min: 0, meaning: 'After SIGTERM, `/readyz` answers 503 at once and new connections are still served this long (set it to your load balancer\'s health-check interval times its unhealthy threshold); then the listener closes and in-flight requests get `shutdownGraceMs`. SIGINT skips it.' },
  'server.headersTimeoutMs': { type: 'integer', default: 10_000, min: 100, meaning: 'The request line and headers must arrive within this; else 408 `request_timeout` and the connection closes.' },
  'server.maxPipelinedRequests': { type: 'integer', default: 1000, min: 1, max: 100_000, meaning: 'Requests a client may send ahead on one connection without reading the answers (Node parses up to 64 KiB ahead). Past it the connection closes after the answer in progress and the client resends the rest (RFC 9112 §9.3.2), as nginx closes after `keepalive_requests`: one connection cannot hold thousands of parsed requests in memory.' },
  'server.bodyTimeoutMs': { type: 'integer', default: 10_000, min: 100, meaning: 'A token request\'s whole body (at most 16 KiB) must arrive within this; else 408 `request_timeout`. Proxied bodies have only the route\'s `idleMs`.' },
  'server.tls': { type: 'mapping', defaultText: 'none (plain HTTP)', meaning: 'Serve HTTPS (TLS 1.2 or newer) on the public port; plain HTTP sent to it gets a 400 problem saying so.' },
  'server.tls.certFile': { required: true, type: 'path', defaultText: 'required with `server.tls`', meaning: 'PEM certificate with its chain, relative to the config file; checked at start against the key.' },
  'server.tls.keyFile': { required: true, type: 'path', defaultText: 'required with `server.tls`', meaning: 'PEM private key, relative to the config file.' },
  'server.tls.reloadIntervalMs': { type: 'integer', default: 5000, min: 100, meaning: 'How often the two files are checked for a change; a renewed pair serves new connections without a restart, a broken one is logged and the one in use kept.' },
  'server.tls.clientCa': { type: 'path', defaultText: 'none (no client certificate asked for)', meaning: 'PEM certificates of the CAs whose client certificates are identities (`via: mtls`, docs/operating.md#client-certificates); reloaded like the certificate.' },
  'server.tls.clientCerts': { type: '`request` or `require`', default: 'request', values: ['request', 'require'], meaning: 'With `clientCa`: `request` asks for a certificate and serves clients without one (a certificate presented that does not verify gets 401 on every request of its connection); `require` refuses the handshake without a valid one.' },
  'server.tls.crlFile': { type: 'path', defaultText: 'none', meaning: 'PEM CRLs of the client CAs (one for each CA of a chain): a revoked certificate is refused at the handshake, and on open connections at their next request once a changed file is read; needs `clientCa`.' },
  'server.tls.userFrom': { type: '`cn`, `san-email`, `san-uri` or `san-dns`', default: 'cn', values: ['cn', 'san-email', 'san-uri', 'san-dns'], meaning: 'Which part of a client certificate is the user name: the subject CN, or the first e-mail, URI or DNS name of its subjectAltName. Its OU values are the groups.' },
  'server.tls.http2': { type: 'boolean', default: true, meaning: 'Offer HTTP/2 (ALPN `h2`) beside HTTP/1.1 on the TLS listener; `false`: HTTP/1.1 only. WebSockets always take HTTP/1.1. Changing it needs a restart.' },
  'server.h2c': { type: 'boolean', default: false, meaning: 'Also serve HTTP/2 with prior knowledge (h2c) on the plain listener: a connection that starts with the HTTP/2 preface is HTTP/2, any other HTTP/1.1, on the same port (behind a load balancer that terminates TLS and speaks h2c, or for gRPC clients without TLS). The `server.http2` limits apply. Without `server.tls` only. Changing it needs a restart.' },
  'server.http2': { type: 'mapping', defaultText: 'all defaults', meaning: 'Limits of HTTP/2 connections (with `server.tls.http2` or `server.h2c`). A connection that floods (reset streams, SETTINGS, PING, invalid frames, an oversized header list) is closed with GOAWAY. Changing them needs a restart.' },
  'server.http2.maxConcurrentStreams': { type: 'integer', default: 100, min: 1, max: 1000, meaning: 'Streams (requests) one HTTP/2 connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS); each still takes its place in the upstream\'s `maxConnections` + `maxQueued`.' },
  'server.http2.maxHeaderListBytes': { type: 'integer', default: 16_384, min: 1024, max: 65_536, meaning: 'The largest header list (names + values + 32 per field, RFC 9113) an HTTP/2 request may carry; a larger one closes the connection with GOAWAY (one over 4 times this Node resets itself; over 100 such within 10 s close it).' },
  'server.workers': { type: 'integer or `auto`', default: 1, min: 1, max: 256, meaning: 'Worker processes sharing the port (node:cluster; `auto`: one per core). Needs `store.kind: redis`; changing it needs a restart.' },

  // store
  'store': { type: 'mapping', defaultText: '`{ kind: memory }`', meaning: 'Where sessions, lockout and rate-limit counters live.' },
  'store.kind': { type: '`memory` or `redis`', default: 'memory', values: ['memory', 'redis'], meaning: '`memory`: one process, sessions die with it (logs a warning). `redis`: shared by every instance (`REDIS_URL` selects it).' },
  'store.url': { type: 'url', defaultText: 'none', meaning: 'One Redis node, `redis://` or `rediss://` (`REDIS_URL` sets it). Exactly one of `url`, `cluster`, `sentinel`.' },
  'store.cluster': { type: 'mapping', defaultText: 'none', meaning: 'A Redis Cluster.' },
  'store.cluster.nodes': { type: 'list of url', defaultText: 'required with `store.cluster`', meaning: 'Seed node URLs; username, password and TLS are taken from the first.' },
  'store.sentinel': { type: 'mapping', defaultText: 'none', meaning: 'A Sentinel-managed master.' },
  'store.sentinel.name': { required: true, type: 'string', defaultText: 'required with `store.sentinel`', meaning: 'The master\'s name as the sentinels know it.' },
  'store.sentinel.sentinels': { type: 'list of host:port', defaultText: 'required with `store.sentinel`', meaning: 'The sentinels to ask for the master.' },
  'store.sentinel.password': { type: 'string', defaultText: 'none', meaning: 'Password of the Redis nodes.' },
  'store.sentinel.sentinelPassword': { type: 'string', defaultText: 'none', meaning: 'Password of the sentinels.' },
  'store.sentinel.tls': { type: 'boolean', default: false, meaning: 'Talk TLS to the nodes and the sentinels.' },
  'store.keyPrefix': { type: 'string', default: 'gw:', meaning: 'Prefix of every Redis key; `{` and `}` are refused (a hash tag would put every key in one cluster slot).' },
  'store.commandTimeoutMs': { type: 'integer', default: 500, min: 1, meaning: 'A hard deadline per Redis command in every topology; past it the request fails with 503.' },
  'store.connectTimeoutMs': { type: 'integer', default: 1000, min: 1, meaning: 'Redis connect timeout; also how long `serve` waits for the store at start before serving anyway, and how long `config check --connect` waits for it.' },
  'store.livenessCacheMs': { type: 'integer', default: 2000, min: 0, max: 60_000, meaning: 'How long an instance may reuse "this session is live" without asking Redis (`0`: ask every time). Revocation stays synchronous (see operating.md).' },
  'store.waitForReplicas': { type: 'integer', min: 0, max: 16, defaultText: '1 with Sentinel, else 0', meaning: 'A session write is answered only once this many replicas have it (`WAIT`). Not supported with `cluster`.' },
  'store.durability': { type: '`available` or `strict`', default: 'available', values: ['available', 'strict'], meaning: 'With fewer connected replicas than `waitForReplicas`: `available` acknowledges session writes without them (one warning per shortfall, counted in `auth_gateway_store_session_writes_total{replication="unreplicated"}`); `strict` refuses them with 503 (before anything is written while the shortfall is known; a write the replicas do not acknowledge in time is answered 503 too: a sign-in so answered leaves no usable session, a refresh may be retried with the same token).' },
  'store.writeLegacySessions': { type: 'boolean', default: true, meaning: 'Also write, beside each session made, the record that releases before the per-user session hashes (c247b92 and earlier) read (a key per session and the per-user index, on the session\'s own Cluster slot, in the same step), so that such a release running beside this one can revoke it (by its access token, `sessions revoke --user`) and is obeyed here. It costs memory: about 690 B a session with one per user, 430 B with four (232 B and 113 B without). `false` once no instance of such a release is left; sessions that have one keep it until it lapses. See store.md, "Rolling upgrades from the layout before".' },

  // users
  'users': { type: 'mapping', defaultText: 'required', meaning: 'Who may sign in.' },
  'users.htpasswd': { type: 'path', defaultText: 'required unless `users.store` or `users.ldap`', meaning: 'htpasswd file (bcrypt entries only), relative to the config file; `auth-gateway users hash NAME` writes a line. Optional when another source of users is set (`users.store`, `users.ldap`).' },
  'users.store': { type: 'boolean', default: false, meaning: 'Also take users kept in the store, managed live with `auth-gateway users add|passwd|remove|groups|list|import` (every instance sees a change at once, no reload); a name also in the htpasswd file is refused from the store. See user-sources.md.' },
  'users.cacheTtlSeconds': { type: 'integer', default: 300, min: 0, meaning: 'How long a verified user:password is remembered in memory (as an HMAC), so steady Basic traffic costs no bcrypt; `0` disables.' },
  'users.watch': { type: 'boolean', default: true, meaning: 'Reload the file when it changes.' },
  'users.maxPendingVerifications': { type: 'integer', default: 64, min: 1, meaning: 'bcrypt checks allowed to wait for the thread pool at once; past it, 503 with `Retry-After: 1`.' },
  'users.groups': { type: 'path', defaultText: 'none', meaning: 'Apache htgroup file (`admins: alice bob`), relative to the config file; watched and reloaded with the users file; read by `routes[].allow.groups`.' },
  'users.ldap': { type: 'mapping', defaultText: 'none', meaning: 'Users from an LDAP directory, verified by binding as them (Basic and token create); a name in the htpasswd file is verified there first. See user-sources.md.' },
  'users.ldap.url': { type: 'url', defaultText: 'required with `users.ldap`', meaning: '`ldaps://host:636`, or `ldap://host:389` (with `startTls: true` for anything but a trusted network).' },
  'users.ldap.startTls': { type: 'boolean', default: false, meaning: 'Upgrade the `ldap://` connection with StartTLS before any bind; refused when it cannot be.' },
  'users.ldap.caFile': { type: 'path', defaultText: 'the system\'s CAs', meaning: 'PEM CA file the directory\'s certificate must chain to (ldaps or StartTLS), relative to the config file.' },
  'users.ldap.userDn': { type: 'string', defaultText: 'none', meaning: 'Direct bind: the user\'s DN, `{user}` replaced by the name escaped per RFC 4514 (`uid={user},ou=people,dc=example,dc=com`). Exactly one of `userDn` and `searchBase`.' },
  'users.ldap.searchBase': { type: 'string', defaultText: 'none', meaning: 'Search: the subtree the user\'s entry is searched in (on the pooled service connection), then bound as; no entry or more than one refuses the name.' },
  'users.ldap.searchFilter': { type: 'string', defaultText: 'required with `searchBase`', meaning: 'The filter of that search, `{user}` replaced by the name escaped per RFC 4515 (`(uid={user})`).' },
  'users.ldap.bindDn': { type: 'string', defaultText: 'none (anonymous searches)', meaning: 'The service account of searches (the user\'s entry, its groups, Bearer requests\' groups).' },
  'users.ldap.bindPassword': { type: 'string', defaultText: 'required with `bindDn`', meaning: 'Its password; write `"${GATEWAY_LDAP_PASSWORD}"` and set the variable.' },
  'users.ldap.groupsBase': { type: 'string', defaultText: 'none (no directory groups)', meaning: 'The subtree searched for the user\'s groups; their names (`cn`) count in `routes[].allow.groups` and identity assertions.' },
  'users.ldap.groupsFilter': { type: 'string', default: '(member={dn})', meaning: 'The filter of that search: `{dn}` is the user\'s DN, `{user}` the name (both escaped per RFC 4515).' },
  'users.ldap.cacheSeconds': { type: 'integer', default: 300, min: 0, meaning: 'How long a verified bind and its groups are remembered in memory (as an HMAC, like `cacheTtlSeconds`); it also keeps those users signing in while the directory is down. `0`: bind every time.' },

  // apiKeys
  'apiKeys': { type: 'mapping, `true` or `false`', defaultText: 'none (no API keys)', meaning: 'Accept API keys of the store (`auth-gateway keys create`), from `apiKeys.header` or as `Authorization: Bearer <key>`; see service-credentials.md.' },
  'apiKeys.header': { type: 'header name', default: 'X-API-Key', meaning: 'The header a key may come in; it never reaches an upstream.' },
  'apiKeys.prefix': { type: 'string', default: 'agk', meaning: 'The visible start of every key: `<prefix>_<id>_<secret>` (2 to 16 lower-case letters and digits). A bearer credential of another form is left to the token check.' },

  // tokens
  'tokens': { type: 'mapping', defaultText: 'required', meaning: 'The tokens of `POST /v1/tokens/*`.' },
  'tokens.issuer': { type: 'string', default: 'auth-gateway', meaning: '`iss` of access tokens, checked on verify.' },
  'tokens.audience': { type: 'string', default: 'auth-gateway', meaning: '`aud` of access tokens, checked on verify.' },
  'tokens.accessTtlSeconds': { type: 'integer', default: 5400, min: 1, meaning: 'Access token lifetime (`expiresInSeconds`).' },
  'tokens.refreshTtlSeconds': { type: 'integer', default: 60 * 24 * 3600, min: 1, meaning: 'Refresh token lifetime (60 days), renewed by each refresh; at least `accessTtlSeconds`.' },
  'tokens.refreshReuseGraceSeconds': { type: 'integer', default: 10, min: 0, max: 3600, meaning: 'Above 0: the refresh token just rotated away, presented again before its successor was used, gets the same refresh token and a new access token however long after the rotation (a retried refresh whose answer was lost to a 503, a reset or a timeout; two tabs); once the successor was used, presenting it revokes the session. The number itself no longer limits retries. `0`: every second use revokes.' },
  'tokens.refreshSecret': { type: 'secret', defaultText: 'derived from `tokens.signing`', meaning: 'At least 32 bytes; the key refresh tokens and the access tokens\' `uv` claim are derived with. Set it before rotating signing keys: without it a new signing key ends every session at once.' },
  'tokens.signing': { type: 'mapping', defaultText: 'required', meaning: 'The key that signs access tokens.' },
  'tokens.signing.alg': { type: '`HS256`, `RS256` or `ES256`', default: 'HS256', values: ['HS256', 'RS256', 'ES256'], meaning: 'Signature algorithm.' },
  'tokens.signing.secret': { type: 'secret', defaultText: 'required with HS256', meaning: 'HS256 secret, at least 32 bytes (e.g. `${GATEWAY_JWT_SECRET}`); there is no built-in default.' },
  'tokens.signing.privateKeyFile': { type: 'path', defaultText: 'required with RS256/ES256', meaning: 'PEM private key, relative to the config file.' },
  'tokens.signing.kid': { type: 'string', defaultText: 'derived from the key', meaning: 'Key id written into the token header.' },
  'tokens.verificationKeys': { type: 'list', default: [], meaning: 'Retired keys that still verify: `{ alg: HS256, secret }` or `{ alg, publicKeyFile }`, optional `kid`. Rotate by moving the old signing key here.' },
  'tokens.verificationKeys[].alg': { type: '`HS256`, `RS256` or `ES256`', default: 'HS256', values: ['HS256', 'RS256', 'ES256'], meaning: 'Signature algorithm.' },
  'tokens.verificationKeys[].secret': { type: 'secret', defaultText: 'required with HS256', meaning: 'HS256 secret, at least 32 bytes.' },
  'tokens.verificationKeys[].publicKeyFile': { type: 'path', defaultText: 'required with RS256/ES256', meaning: 'PEM public key, relative to the config file.' },
  'tokens.verificationKeys[].kid': { type: 'string', defaultText: 'derived from the key', meaning: 'Key id tokens signed with it carry.' },
  'tokens.cors': { type: 'mapping', defaultText: 'none', meaning: 'CORS of `POST /v1/tokens/*` for browser apps on other origins: a block as in `routes[].cors`; `methods` defaults to `[POST]`.' },

  // lockout
  'lockout': { type: 'mapping', defaultText: 'all defaults', meaning: 'The brute-force policy (see security.md).' },
  'lockout.maxFailuresPerUser': { type: 'integer', default: 10, min: 1, meaning: 'Failed checks of one user name from one address within the window; then that pair gets 429 until the window ends.' },
  'lockout.maxFailuresPerAccount': { type: 'integer', default: 100, min: 1, meaning: 'Consecutive failed checks of one user name from all addresses; then 429 for every client of that user not verified moments ago, until the window ends or `lockout clear` (NIST SP 800-63B: at most 100).' },
  'lockout.windowSeconds': { type: 'integer', default: 900, min: 1, meaning: 'The window of both counts, from the first failure.' },
  'lockout.addressBurst': { type: 'integer', default: 10, min: 1, meaning: 'Failed checks (any user names) an address may make at once before it is slowed down.' },
  'lockout.addressFailuresPerMinute': { type: 'integer', default: 30, min: 1, max: 6000, meaning: 'After the burst, failed checks an address may make per minute; in between it gets 429 with a short `Retry-After`: slowed, never locked out.' },
  'lockout.maxFailuresPerAddress': { type: 'integer (retired)', defaultText: 'none', min: 1, meaning: 'Retired: an address is slowed down, never locked out. Still read, with a warning, as `addressBurst` when that is not set; write `addressBurst` (and `addressFailuresPerMinute`) instead. It will be refused from a later release on.' },

  // rateLimit
  'rateLimit': { type: 'mapping or `false`', defaultText: 'none', meaning: 'Per-user limit of proxied requests on each route (GCRA, kept in the store, shared by every instance); past it 429 `rate_limited` with `Retry-After`.' },
  'rateLimit.requests': { required: true, type: 'integer', defaultText: 'required with `rateLimit`', min: 1, meaning: 'Requests each user may make per window (also the burst).' },
  'rateLimit.windowSeconds': { type: 'integer', default: 60, min: 1, meaning: 'The window.' },

  // upstreams
  'upstreams': { type: 'mapping of name to upstream', defaultText: 'none', meaning: 'The services requests are forwarded to.' },
  'upstreams.<name>.url': { type: 'url', defaultText: 'required (or `targets`)', meaning: 'Base URL (`http:` or `https:`); its path is the base the request path is joined onto. Exactly one of `url` and `targets`.' },
  'upstreams.<name>.targets': { type: 'list of url', defaultText: 'none', meaning: 'A pool of targets, each with its own keep-alive pool.' },
  'upstreams.<name>.protocol': { type: '`http1`, `h2c` or `h2`', default: 'http1', values: ['http1', 'h2c', 'h2'], meaning: 'How the gateway speaks to the targets: `http1` (HTTP/1.1, `http:` or `https:` URLs), `h2c` (HTTP/2 with prior knowledge, `http:` URLs) or `h2` (HTTP/2 over TLS with ALPN, `https:` URLs). HTTP/2 targets share a few pooled connections (one per target, more when its `maxConcurrentStreams` is reached) and carry gRPC (docs/grpc.md); WebSocket handshakes to them get 502.' },
  'upstreams.<name>.caFile': { type: 'path', defaultText: 'Node\'s CAs (and `NODE_EXTRA_CA_CERTS`)', meaning: 'PEM CA certificates an `https:` target\'s certificate may also chain to (beside Node\'s own and `NODE_EXTRA_CA_CERTS`), relative to the config file.' },
  'upstreams.<name>.balance': { type: '`round-robin` or `least-requests`', default: 'round-robin', values: ['round-robin', 'least-requests'], meaning: 'How a request picks a target (`least-requests`: fewest in flight; ties round-robin).' },
  'upstreams.<name>.cooldownMs': { type: 'integer', default: 10_000, min: 1, meaning: 'A target that refused a connection (or did not accept it within `connectMs`) is skipped this long.' },
  'upstreams.<name>.healthCheck': { type: 'mapping', defaultText: 'none', meaning: 'Probe each target with `GET path`; other than 2xx/3xx (or no answer) takes it out of rotation until it answers again.' },
  'upstreams.<name>.healthCheck.path': { required: true, type: 'string', defaultText: 'required with `healthCheck`', meaning: 'Path probed, starting with `/`. For an `h2c` or `h2` upstream, `/grpc.health.v1.Health/Check` asks the gRPC health protocol instead (the whole server, service `""`): `SERVING` is healthy.' },
  'upstreams.<name>.healthCheck.intervalMs': { type: 'integer', default: 5000, min: 100, meaning: 'Time between probes.' },
  'upstreams.<name>.healthCheck.timeoutMs': { type: 'integer', default: 2000, min: 10, meaning: 'A probe without an answer within this fails.' },
  'upstreams.<name>.timeouts': { type: 'mapping', defaultText: 'all defaults', meaning: 'What each timeout measures, so a slow upload or a quiet stream is not mistaken for a dead upstream.' },
  'upstreams.<name>.timeouts.connectMs': { type: 'integer', default: 5000, min: 1, meaning: 'Opening a new connection; past it, 504.' },
  'upstreams.<name>.timeouts.responseMs': { type: 'integer', default: 30_000, min: 1, meaning: 'Response headers, counted once the request body has been sent in full; past it, 504.' },
  'upstreams.<name>.timeouts.idleMs': { type: 'integer', default: 60_000, min: 1, meaning: 'No bytes either way while a body streams: a stalled upload gets 408 (or 504), a stalled response is cut.' },
  'upstreams.<name>.timeoutMs': { type: 'integer', min: 1, defaultText: 'none', meaning: 'The one-number form of earlier releases: sets `timeouts.responseMs`.' },
  'upstreams.<name>.preserveHost': { type: 'boolean', default: false, meaning: 'Send the client\'s `Host` instead of the upstream\'s own, for backends that build URLs from it.' },
  'upstreams.<name>.maxConnections': { type: 'integer', default: 256, min: 1, meaning: 'Connections to each target at most (the keep-alive agent\'s `maxSockets`); for `h2c` and `h2`, streams (requests) in progress to each target at most.' },
  'upstreams.<name>.maxQueued': { type: 'integer', default: 1024, min: 0, meaning: 'Requests per target that may wait for one of those connections; past both, 503 `service_unavailable` with `Retry-After: 1`.' },
  'upstreams.<name>.maxTunnels': { type: 'integer', default: 4096, min: 1, meaning: 'WebSocket connections open to this upstream at most, per process (each worker counts its own), all its targets together and handshakes in progress included (a tunnel holds two sockets outside the connection pool until one side leaves); past it, a handshake gets 503 `service_unavailable` with `Retry-After: 1`.' },

  // routes
  'routes': { type: 'list of route', default: [], meaning: 'Path prefixes and where they go; matched on segment boundaries, the longest wins.' },
  'routes[].path': { required: true, type: 'string', defaultText: 'required', meaning: 'Path prefix of plain segments, e.g. `/v1/conversations` (never under `/v1/tokens`); the longest one matches, without regard to ASCII case (`/V1/Conversations/7` too), so no two may differ only in case.' },
  'routes[].upstream': { type: 'string', defaultText: 'required (optional with `forwardAuth`)', meaning: 'Name of an upstream. Without one (only with `forwardAuth`), the route is matched only for forward-auth answers.' },
  'routes[].forwardAuthorization': { type: 'boolean', default: false, meaning: 'Pass the client\'s `Authorization` header on.' },
  'routes[].stripPrefix': { type: 'boolean', default: false, meaning: 'Remove the route\'s path before forwarding and join the rest onto the upstream URL\'s path; redirects map back.' },
  'routes[].timeouts': { type: 'mapping', defaultText: 'the upstream\'s', meaning: '`{ connectMs, responseMs, idleMs }`, each overriding the upstream\'s for this route.' },
  'routes[].timeouts.connectMs': { type: 'integer', min: 1, defaultText: 'the upstream\'s', meaning: 'As `upstreams.<name>.timeouts.connectMs`, for this route.' },
  'routes[].timeouts.responseMs': { type: 'integer', min: 1, defaultText: 'the upstream\'s', meaning: 'As `upstreams.<name>.timeouts.responseMs`, for this route.' },
  'routes[].timeouts.idleMs': { type: 'integer', min: 1, defaultText: 'the upstream\'s', meaning: 'As `upstreams.<name>.timeouts.idleMs`, for this route.' },
  'routes[].allowHeaders': { type: 'list of header names', default: [], meaning: 'Request-target and method override headers (`X-HTTP-Method-Override`, `X-Original-URL`, …) this route passes on; every other one is removed.' },
  'routes[].paging': { type: 'mapping or `true`', defaultText: 'none', meaning: 'Apply the paging rules on GET/HEAD (`true`: the defaults, nothing sortable); other spellings of `size`, `page`, `sort` (`SIZE`, `size[]`, `size.x`, `size%00`, `size%20`) are refused.' },
  'routes[].paging.sizes': { type: 'list of integer', default: [10, 20, 50, 100, 200], meaning: 'The page sizes a client may ask for.' },
  'routes[].paging.defaultSize': { type: 'integer', default: 20, min: 1, meaning: 'The size when none is asked for; one of `sizes`.' },
  'routes[].paging.sortable': { type: 'list of string', default: [], meaning: 'Properties a client may sort by.' },
  'routes[].rateLimit': { type: 'mapping or `false`', defaultText: 'the global `rateLimit`', meaning: 'This route\'s own `{ requests, windowSeconds }`, or `false` for none.' },
  'routes[].websocket': { type: 'boolean', default: true, meaning: 'Proxy WebSocket upgrades on this route; `false`: 403 `websocket_not_allowed`.' },
  'routes[].cors': { type: 'mapping', defaultText: 'none', meaning: 'This route\'s CORS; none: the gateway adds no CORS headers and passes the upstream\'s.' },
  'routes[].cors.origins': { type: 'list of origins, or `*`', defaultText: 'required', meaning: 'Exact origins (`https://app.example.com`), or `*` for any (only without credentials).' },
  'routes[].cors.methods': { type: 'list of methods', default: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'], meaning: 'Methods a preflight may ask for.' },
  'routes[].cors.headers': { type: 'list of header names', default: ['authorization', 'content-type', 'x-request-id'], meaning: 'Request headers a preflight may ask for.' },
  'routes[].cors.exposedHeaders': { type: 'list of header names', default: ['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'WWW-Authenticate'], meaning: 'Response headers the page may read.' },
  'routes[].cors.credentials': { type: 'boolean', default: false, meaning: 'The browser may send cookies or its own HTTP authentication (`Access-Control-Allow-Credentials`).' },
  'routes[].cors.maxAge': { type: 'integer', default: 600, min: 0, max: 86_400, meaning: 'Seconds a browser may cache a preflight\'s answer.' },
  'routes[].allow': { type: 'mapping', defaultText: 'none (any authenticated user)', meaning: 'Who may use the route; others get 403 `forbidden` after authentication (proxied requests, WebSocket handshakes and forward-auth answers alike).' },
  'routes[].allow.users': { type: 'list of string', defaultText: 'none', meaning: 'Users allowed by name.' },
  'routes[].allow.groups': { type: 'list of string', defaultText: 'none', meaning: 'Members of these groups (`users.groups`) are allowed.' },
  'routes[].allow.methods': { type: 'list of methods', defaultText: 'every method', meaning: 'Methods allowed (upper case; `HEAD` is not implied by `GET`).' },
  'routes[].audience': { type: 'string', defaultText: 'the upstream\'s name (else the route path)', meaning: '`aud` of the identity assertions sent on this route.' },
  'routes[].login': { type: 'boolean', default: false, meaning: 'A browser navigation (`GET`/`HEAD` with `Accept: text/html`) without credentials is sent to sign in (`login`); any other request without credentials keeps the 401.' },

  // forwardAuth
  'forwardAuth': { type: 'mapping', defaultText: 'none', meaning: 'Answer other proxies\' authorization questions (nginx `auth_request`, Caddy `forward_auth`, Traefik ForwardAuth); see authorization.md.' },
  'forwardAuth.path': { required: true, type: 'path', defaultText: 'required with `forwardAuth`', meaning: 'Exact path (any method) answered about the request it describes; must not be one of the gateway\'s own paths or under `/v1/tokens`.' },
  'forwardAuth.trustedProxies': { type: 'list of addresses or CIDR blocks', defaultText: 'none (any caller)', meaning: 'Only these may ask (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`), judged by the TCP peer\'s address, never `X-Forwarded-For`; any other caller gets 403 `forbidden`. Without it `config check` warns: the path answers any client that reaches the port.' },

  // identity
  'identity': { type: 'mapping', defaultText: 'all defaults', meaning: 'What upstreams learn about the user.' },
  'identity.assertion': { type: 'mapping', defaultText: 'none', meaning: 'Sign a short-lived JWT about the user onto every proxied request, WebSocket handshake and forward-auth 200; public keys at `GET /.well-known/jwks.json`.' },
  'identity.assertion.header': { type: 'header name', default: 'X-Identity-Assertion', meaning: 'The header that carries it; a client-sent one is always removed.' },
  'identity.assertion.alg': { type: '`ES256`, `RS256` or `EdDSA`', default: 'ES256', values: ['ES256', 'RS256', 'EdDSA'], meaning: 'Signature algorithm; every key in `keyFile` must fit it.' },
  'identity.assertion.keyFile': { required: true, type: 'path', defaultText: 'required with `identity.assertion`', meaning: 'PEM with one or more private keys, relative to the config file: the first signs, all are published (rotation); `kid` is each key\'s thumbprint.' },
  'identity.assertion.ttlSeconds': { type: 'integer', default: 60, min: 5, max: 86_400, meaning: 'Lifetime of an assertion; one is reused per user, groups and audience until shortly before it expires.' },
  'identity.issuers': { type: 'list', defaultText: 'none (no outside bearer tokens)', meaning: 'OpenID providers whose JWT bearer tokens are accepted beside the gateway\'s own (see openid.md); a `Bearer` token whose `iss` equals one of them is verified against that provider\'s keys.' },
  'identity.issuers[].name': { type: 'string', defaultText: 'required', meaning: 'The provider\'s name in logs, metrics and `config check --connect` (letters, digits, `.`, `_`, `-`); principals it proves have `via: oidc`.' },
  'identity.issuers[].issuer': { type: 'url', defaultText: 'required', meaning: 'The provider\'s issuer identifier; a token\'s `iss` must equal it exactly. `https://`, or `http://` on a loopback address only.' },
  'identity.issuers[].jwksUri': { type: 'url', defaultText: 'the `jwks_uri` of `<issuer>/.well-known/openid-configuration`', meaning: 'Where the provider publishes its keys. Keys are cached for the answer\'s `max-age` (bounded to 60 s…24 h; 300 s without one); an unknown `kid` fetches them again, at most once per 10 s; a failed fetch keeps the cached keys.' },
  'identity.issuers[].audiences': { type: 'list of string', defaultText: 'required', meaning: 'A token\'s `aud` must contain one of these.' },
  'identity.issuers[].algorithms': { type: 'list of algorithms', default: ['RS256', 'PS256', 'ES256', 'EdDSA'], values: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'], meaning: 'Signature algorithms accepted from this provider (a key that names its `alg` is used with that one only); `HS*` and `none` are refused.' },
  'identity.issuers[].userClaim': { type: 'string', default: 'sub', meaning: 'The claim (a dotted path) whose string value is the user name.' },
  'identity.issuers[].groupsClaim': { type: 'string', defaultText: 'none', meaning: 'The claim (a dotted path, e.g. `realm_access.roles`) holding the user\'s groups as a list of strings; they count as groups for `routes[].allow.groups`, identity headers and assertions.' },
  'identity.issuers[].caFile': { type: 'path', defaultText: 'none (the system\'s CAs)', meaning: 'PEM file of CA certificates trusted for the provider\'s TLS, beside the system\'s; relative to the config file.' },
  'identity.issuers[].clockSkewSeconds': { type: 'integer', default: 30, min: 0, max: 300, meaning: 'Leeway for `exp` and `nbf`.' },

  // login
  'login': { type: 'mapping', defaultText: 'none (no browser sign-in)', meaning: 'Browser sign-in at an OpenID provider (authorization code with PKCE): a gateway session in the store and a cookie; see openid.md.' },
  'login.issuer': { type: 'string', defaultText: 'required unless `login.local`', meaning: 'The `name` of the `identity.issuers` entry browsers sign in at; its `userClaim`, `groupsClaim`, `caFile` and keys apply. Without it (`login.local` alone) there is no provider.' },
  'login.clientId': { type: 'string', defaultText: 'required with `login.issuer`', meaning: 'The gateway\'s client id at the provider; an ID token\'s and a logout token\'s `aud`.' },
  'login.clientSecret': { type: 'secret', defaultText: 'none (a public client: PKCE only)', meaning: 'The client secret (`client_secret_basic`), e.g. `${GATEWAY_OIDC_CLIENT_SECRET}`.' },
  'login.scopes': { type: 'list of string', default: ['openid', 'profile', 'email'], meaning: 'Scopes asked for; must include `openid`.' },
  'login.providers': { type: 'list', defaultText: 'none (the one provider of `login.issuer`, if any)', meaning: 'Several providers to sign in at, each offered by a button of the sign-in page; not with `login.issuer` (a file with both is refused). All share `callbackPath`, `logoutPath` and `backchannelLogoutPath`: a sign-in\'s state names its provider.' },
  'login.providers[].issuer': { type: 'string', defaultText: 'required', meaning: 'The `name` of an `identity.issuers` entry (each at most once).' },
  'login.providers[].clientId': { type: 'string', defaultText: 'required', meaning: 'The gateway\'s client id at that provider.' },
  'login.providers[].clientSecret': { type: 'secret', defaultText: 'none (a public client)', meaning: 'Its client secret (`client_secret_basic`).' },
  'login.providers[].scopes': { type: 'list of string', default: ['openid', 'profile', 'email'], meaning: 'Scopes asked for there; must include `openid`.' },
  'login.providers[].label': { type: 'string', defaultText: 'the issuer\'s name', meaning: 'What its button says after "Sign in with".' },
  'login.callbackPath': { type: 'path', default: '/auth/callback', meaning: 'Where the provider sends the browser back (register `<publicUrl><callbackPath>` as a redirect URI); `GET <callbackPath>?rd=/path` starts a sign-in.' },
  'login.logoutPath': { type: 'path', default: '/auth/logout', meaning: '`POST` (from the gateway\'s own pages: Origin and a form token) ends the gateway session and sends the browser to the provider\'s `end_session_endpoint` with `id_token_hint`, `post_logout_redirect_uri` and `state` (to `postLogoutRedirectUri` without a provider); `GET` shows a page asking to confirm, so a link from another site cannot sign anyone out.' },
  'login.local': { type: 'boolean', default: false, meaning: 'A sign-in page at `signInPath` for the gateway\'s own users (users file, `users.store`, `users.ldap`): a form checked like Basic (same lockout), making the same store session and cookie as a provider sign-in. With it, browsers without credentials on `login` routes go to that page.' },
  'login.signInPath': { type: 'path', default: '/auth/sign-in', meaning: 'The sign-in page (with `local`, or to choose among several ways to sign in); `?rd=/path` is where to go back to. Its stylesheet is `<signInPath>/style.css`.' },
  'login.mePath': { type: 'path', default: '/auth/me', meaning: 'The signed-in person\'s page: who they are (user, groups, how they signed in) and their sessions, each with a button to end it (or all but this one); `Accept: application/json` gets the same as JSON (with a bearer token: its own session).' },
  'login.postLogoutRedirectUri': { type: 'string', defaultText: 'the sign-in page with `local`, else `/`', meaning: 'Where a browser lands after sign-out: an absolute URL (sent to the provider exactly as written, register it there) or a path on the gateway (made absolute on the public origin).' },
  'login.page': { type: 'mapping', defaultText: 'all defaults', meaning: 'The look of the sign-in pages (docs/sign-in.md).' },
  'login.page.title': { type: 'string', default: 'auth-gateway', meaning: 'The name shown at the top of every page and in its title.' },
  'login.page.logoUrl': { type: 'url', defaultText: 'none', meaning: 'An image shown above the title: `https://` (its origin is added to the pages\' Content-Security-Policy `img-src`) or a path on the gateway.' },
  'login.page.templatesDir': { type: 'path', defaultText: 'the built-in templates', meaning: 'A folder of templates replacing the built-in ones file by file (`layout.html`, `sign-in.html`, `sign-out.html`, `me.html`, `style.css`), relative to the config file; read at start and on reload.' },
  'login.backchannelLogoutPath': { type: 'path', default: '/auth/backchannel-logout', meaning: 'OpenID Connect Back-Channel Logout: `POST` with a `logout_token` revokes the sessions of that provider session (`sid`) or user (`sub`) on every instance before the 200.' },
  'login.logoutTokenMaxAgeSeconds': { type: 'integer', default: 300, min: 10, max: 3600, meaning: 'A logout token issued (`iat`) longer ago than this, plus `clockSkewSeconds`, is refused; each one\'s `jti` is remembered in the store this long, so a replay is refused on every instance.' },
  'login.sessionTtlSeconds': { type: 'integer', default: 28_800, min: 60, max: 2_592_000, meaning: 'Lifetime of a browser session (and of its cookie).' },
  'login.cookieName': { type: 'string', default: '__Host-gateway', meaning: 'The session cookie (`Secure`, `HttpOnly`, `SameSite=Lax`, `Path=/`, an opaque sealed handle); the state of each sign-in is kept in a cookie `<cookieName>-login-<id>` until its callback.' },
  'login.publicUrl': { type: 'url', defaultText: 'none (from the request\'s scheme and host; `X-Forwarded-*` only behind `server.trustProxy` hops)', meaning: 'The gateway\'s public origin (`https://gw.example.com`) the callback URL and redirects are built on; `http://` only on loopback.' },

  // log
  'log': { type: 'mapping', defaultText: 'all defaults', meaning: 'JSON lines on stdout.' },
  'log.level': { type: '`debug`, `info`, `warn`, `error` or `silent`', default: 'info', values: ['debug', 'info', 'warn', 'error', 'silent'], meaning: 'The least severe level written.' },
  'log.access': { type: 'boolean', default: true, meaning: 'One access line per request after its response.' },

  // tracing
  'tracing': { type: 'mapping', defaultText: 'none (off, unless an `OTEL_EXPORTER_OTLP_*ENDPOINT` variable is set)', meaning: 'OpenTelemetry traces exported over OTLP/HTTP: a SERVER span per request, a CLIENT span per upstream call, W3C Trace Context in and out. The standard `OTEL_*` variables win over these keys; `OTEL_SDK_DISABLED=true` turns tracing off whatever is set (docs/operating.md#traces). Changing it needs a restart.' },
  'tracing.endpoint': { type: 'url', defaultText: 'none (tracing off)', meaning: 'The OTLP/HTTP collector\'s base URL (`http://collector:4318`); spans go to `<endpoint>/v1/traces`. `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or `OTEL_EXPORTER_OTLP_ENDPOINT` win.' },
  'tracing.protocol': { type: '`http/protobuf` or `http/json`', default: 'http/protobuf', values: ['http/protobuf', 'http/json'], meaning: 'The OTLP encoding (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL` win).' },
  'tracing.serviceName': { type: 'string', default: 'auth-gateway', meaning: 'The `service.name` of the spans (`OTEL_SERVICE_NAME` wins).' },
  'tracing.sampleRatio': { type: 'number, 0 to 1', default: 1, meaning: 'The share of new traces recorded; a request\'s trace that the caller sampled (or not) is followed (parent-based). `OTEL_TRACES_SAMPLER`/`OTEL_TRACES_SAMPLER_ARG` win.' },
  'tracing.headers': { type: 'mapping of strings', defaultText: 'none', meaning: 'Headers sent with every export (`authorization: Bearer ${COLLECTOR_TOKEN}`); `OTEL_EXPORTER_OTLP_HEADERS` wins per header.' },

  // admin
  'admin': { type: 'mapping or `false`', defaultText: '`{ host: 127.0.0.1, port: 9091 }`', meaning: 'The admin listener (plain HTTP, no authentication): `/metrics`, `/healthz`, `/readyz`; `false`: none.' },
  'admin.host': { type: 'string', default: '127.0.0.1', meaning: 'Its address; keep it on loopback or a private interface.' },
  'admin.port': { type: 'integer', default: 9091, min: 0, max: 65535, meaning: 'Its port (`0`: any free port, logged).' },
  'admin.apiToken': { type: 'secret', defaultText: 'none (the admin API is off)', meaning: 'At least 32 bytes (e.g. `${GATEWAY_ADMIN_TOKEN}`): turns on the admin API for API keys and users kept in the store (`/v1/keys`, `/v1/users`, in the listener\'s `/openapi.json`), asked for as `Authorization: Bearer <token>`; every change is an audit line. Not with `server.workers` above 1.' },
} as const satisfies Record<string, Setting>;

export type SettingKey = keyof typeof SETTINGS;

/** The entry of a key path. */
export function setting(key: SettingKey): Setting {
  return SETTINGS[key];
}

/** The default of a key whose default is a number (a mistake in the table fails at start, in every test). */
export function numberDefault(key: SettingKey): number {
  const d = setting(key).default;
  if (typeof d !== 'number') throw new Error(`${key} has no numeric default in the settings table`);
  return d;
}

/** The keys one level below `prefix` ('' for the top level): what validation accepts there. */
export function childrenOf(prefix: string): string[] {
  const start = prefix ? `${prefix}.` : '';
  const out = new Set<string>();
  for (const key of Object.keys(SETTINGS)) {
    if (!key.startsWith(start) || key === prefix) continue;
    const rest = key.slice(start.length);
    const child = /^[^.[\]]+/.exec(rest)?.[0];
    if (child && child !== '<name>') out.add(child);
  }
  return [...out];
}
