import { REFUSAL_HEADER } from '../pipeline/refusal-relay.js';
import { proxyProblem, titleCase, UPSTREAM_HEADER, type Site } from './site.js';

/**
 * A file for nginx's `conf.d/` (http-level blocks only, nothing the operator's main file owns: no
 * `include`, pid, log or temp paths) that fronts the whole site with `auth_request` to the gateway:
 *
 * - every request not for the gateway's own paths is asked of the gateway (`/_gateway_auth`), so a path
 *   no route serves gets the gateway's 404;
 * - a passed request goes to the upstream the gateway's answer names (`X-Gateway-Upstream`, mapped to
 *   this file's `upstream` blocks and nothing else), with the identity headers of the answer, the
 *   answer's cleaned `Cookie`, and every header of the gateway's table cleared;
 * - a refused one is relayed (`X-Gateway-Relay: refusals`): nginx understands only 2xx, 401 and 403 from
 *   `auth_request`, so the gateway answers 403 with the whole answer sealed, and `@gateway_refusal` asks
 *   the gateway to write exactly that answer (429 with Retry-After, 404, 400, 503, the sign-in redirect);
 * - failures nginx meets itself (the gateway or an upstream unreachable, a timeout) are problem bodies.
 */
export function nginxRecipe(site: Site, source: string): string {
  const vars = site.answerHeaders.map((h) => ({ header: h, variable: `$gw_${h.toLowerCase().replace(/-/g, '_')}` }));
  const out: string[] = [
    ...header(source),
    'upstream auth_gateway {',
    `    server ${site.gateway.hostPort};`,
    '    keepalive 16;',
    '}',
    '',
  ];
  for (const u of site.upstreams) {
    out.push(`# upstreams.${u.name}`, `upstream gw_upstream_${u.name} {`);
    for (const t of u.targets) out.push(`    server ${t};`);
    out.push('    keepalive 16;', '}', '');
  }
  out.push(
    '# Nothing to send to: the answer named no upstream of this file (a 502 problem, below).',
    'upstream gw_no_upstream {',
    '    server 127.0.0.1:9 down;',
    '}',
    '',
    `# The upstream of the route the gateway judged the request by (its answer's ${UPSTREAM_HEADER}), and no other.`,
    'map $gw_upstream $gw_pass {',
    '    default gw_no_upstream;',
    ...site.upstreams.map((u) => `    ${u.name} gw_upstream_${u.name};`),
    '}',
    'map $gw_upstream $gw_scheme {',
    '    default http;',
    ...site.upstreams.filter((u) => u.scheme === 'https').map((u) => `    ${u.name} https;`),
    '}',
    '# The Host an upstream gets: its own (as the gateway sends it), or the client\'s with preserveHost.',
    'map $gw_upstream $gw_host {',
    '    default $host;',
    ...site.upstreams.map((u) => `    ${u.name} ${u.preserveHost ? '$http_host' : `"${u.targets[0]}"`};`),
    '}',
    'map $http_upgrade $gw_connection {',
    '    default upgrade;',
    '    "" "";',
    '}',
    '',
    'server {',
    `    listen ${site.listen.host ? `${site.listen.host}:` : ''}${site.listen.port};`,
    '    # Headers with _ in their names are dropped: CGI, PHP and WSGI upstreams read X_Authenticated_User as',
    '    # X-Authenticated-User. These are nginx\'s defaults, written out so an include cannot turn them off.',
    '    underscores_in_headers off;',
    '    ignore_invalid_headers on;',
    '    # As the gateway: bodies of any size, streamed both ways (uploads, downloads, server-sent events).',
    '    client_max_body_size 0;',
    '    proxy_request_buffering off;',
    '    proxy_buffering off;',
    '    # Room for the table of cleared headers below.',
    '    proxy_headers_hash_max_size 1024;',
    '    proxy_headers_hash_bucket_size 128;',
    '',
    '    # The gateway\'s own endpoints, answered by the gateway.',
  );
  for (const path of site.ownPaths) out.push(`    location = ${path} {`, ...toGateway(), '    }');
  for (const prefix of site.ownPrefixes) {
    out.push(`    location = ${prefix} {`, ...toGateway(), '    }', `    location ${prefix}/ {`, ...toGateway(), '    }');
  }
  out.push(
    '',
    '    # The question: may this request pass, and as whom? (asked with the client\'s credentials, never its body)',
    '    location = /_gateway_auth {',
    '        internal;',
    `        proxy_pass ${site.gateway.scheme}://auth_gateway${site.askPath};`,
    '        proxy_http_version 1.1;',
    '        proxy_set_header Connection "";',
    '        proxy_pass_request_body off;',
    '        proxy_set_header Content-Length "";',
    '        proxy_set_header Transfer-Encoding "";',
    '        proxy_set_header X-Original-Method $request_method;',
    '        proxy_set_header X-Original-URI $request_uri;',
    '        proxy_set_header X-Forwarded-Host $http_host;',
    '        proxy_set_header X-Forwarded-Proto $scheme;',
    '        proxy_set_header X-Forwarded-For $remote_addr;',
    '        proxy_set_header X-Gateway-Relay refusals;',
    '        # Only nginx describes the request: a client\'s copies of the other pair and of the relay are dropped.',
    '        proxy_set_header X-Forwarded-Method "";',
    '        proxy_set_header X-Forwarded-Uri "";',
    `        proxy_set_header ${titleCase(REFUSAL_HEADER)} "";`,
    '    }',
    '',
    '    # A refusal, written by the gateway exactly as it made it (status, headers, problem body).',
    ...refusalLocation(site.askPath, `${site.gateway.scheme}://auth_gateway`).map((l) => `    ${l}`),
    '    location @gateway_unavailable {',
    '        default_type application/problem+json;',
    '        add_header Retry-After 1 always;',
    `        return 503 '${proxyProblem(503)}';`,
    '    }',
    '    location @upstream_unreachable {',
    '        default_type application/problem+json;',
    `        return 502 '${proxyProblem(502)}';`,
    '    }',
    '    location @upstream_timeout {',
    '        default_type application/problem+json;',
    `        return 504 '${proxyProblem(504)}';`,
    '    }',
    '',
    '    location / {',
    '        auth_request /_gateway_auth;',
    `        auth_request_set $gw_upstream $upstream_http_${snake(UPSTREAM_HEADER)};`,
    `        auth_request_set $gw_refusal $upstream_http_${snake(REFUSAL_HEADER)};`,
    ...vars.map((v) => `        auth_request_set ${v.variable} $upstream_http_${snake(v.header)};`),
    ...(site.login ? ['        auth_request_set $gw_cookie $upstream_http_cookie;'] : []),
    '        error_page 401 403 = @gateway_refusal;',
    '        error_page 500 = @gateway_unavailable;',
    '        error_page 502 = @upstream_unreachable;',
    '        error_page 504 = @upstream_timeout;',
    '',
    '        # The gateway\'s table of removed headers: a client\'s copies never reach an upstream.',
    ...site.cleared.filter((name) => !site.answerHeaders.some((h) => h.toLowerCase() === name)).map((name) => `        proxy_set_header ${titleCase(name)} "";`),
    '        # Families the gateway removes by prefix: their known names.',
    ...site.families.flatMap((f) => f.members.map((m) => `        proxy_set_header ${titleCase(m)} "";`)),
    '        # Who the request is, from the gateway\'s answer (an empty value sends no header).',
    ...vars.map((v) => `        proxy_set_header ${v.header} ${v.variable};`),
    ...(site.login ? ['        # The client\'s cookies without the gateway\'s own session cookie.', '        proxy_set_header Cookie $gw_cookie;'] : []),
    '        proxy_set_header Host $gw_host;',
    '        proxy_set_header X-Forwarded-For $remote_addr;',
    '        proxy_set_header X-Forwarded-Proto $scheme;',
    '        proxy_set_header X-Forwarded-Host $http_host;',
    '        proxy_set_header Upgrade $http_upgrade;',
    '        proxy_set_header Connection $gw_connection;',
    '        proxy_http_version 1.1;',
    `        proxy_connect_timeout ${Math.ceil(site.connectTimeoutMs / 1000)}s;`,
    `        proxy_read_timeout ${Math.ceil(site.readTimeoutMs / 1000)}s;`,
    `        proxy_send_timeout ${Math.ceil(site.readTimeoutMs / 1000)}s;`,
    ...(site.upstreams.some((u) => u.scheme === 'https') ? [
      '        proxy_ssl_server_name on;',
      '        proxy_ssl_name $gw_host;',
      '        proxy_ssl_verify on;',
      '        proxy_ssl_trusted_certificate /etc/ssl/certs/ca-certificates.crt;',
    ] : []),
    '        proxy_pass $gw_scheme://$gw_pass;',
    '    }',
    '}',
    '',
  );
  return out.join('\n');

  function toGateway(): string[] {
    return [
      `        proxy_pass ${site.gateway.scheme}://auth_gateway;`,
      '        proxy_http_version 1.1;',
      '        proxy_set_header Connection "";',
      '        proxy_set_header X-Forwarded-For $remote_addr;',
      '        proxy_set_header X-Forwarded-Proto $scheme;',
      '        proxy_set_header X-Forwarded-Host $http_host;',
    ];
  }
}

/**
 * The named location that asks the gateway to write a relayed refusal (`$gw_refusal`, the sealed answer
 * `auth_request_set` kept): a bodiless GET of the forward-auth path with that one header.
 */
export function refusalLocation(askPath: string, gateway: string): string[] {
  return [
    'location @gateway_refusal {',
    `    rewrite ^ ${askPath} break;`,
    '    proxy_method GET;',
    '    proxy_pass_request_headers off;',
    '    proxy_pass_request_body off;',
    '    proxy_set_header Content-Length "";',
    `    proxy_set_header ${titleCase(REFUSAL_HEADER)} $gw_refusal;`,
    '    proxy_http_version 1.1;',
    '    proxy_set_header Connection "";',
    `    proxy_pass ${gateway};`,
    '}',
  ];
}

/** `X-Gateway-Upstream` → `x_gateway_upstream`: the name of nginx's `$upstream_http_…` variable. */
function snake(header: string): string {
  return header.toLowerCase().replace(/-/g, '_');
}

function header(source: string): string[] {
  return [
    `# Generated by \`auth-gateway recipe nginx\` from ${source}.`,
    '# Regenerate it after every upgrade of the gateway and every change of its configuration; change the',
    '# configuration, not this file. For nginx\'s conf.d/ (http-level blocks only).',
    '',
  ];
}
