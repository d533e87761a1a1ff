// A real OpenID Provider (node-oidc-provider, a certified OP implementation) as its own process, on
// loopback HTTPS, for the gateway's tests. Started by test/support/oidc-provider.ts with the path of a
// JSON settings file as its only argument; prints one line `{"listening":<port>,"issuer":"…"}` once it
// serves. Test-only additions, beside the provider's own endpoints: it counts GETs of its JWK Set
// (GET /test/jwks-fetches answers the count) and can add a Cache-Control header to that answer.
import { readFileSync } from 'node:fs';
import { createServer, request as httpsRequest } from 'node:https';
import Provider, { errors } from 'oidc-provider';

const settings = JSON.parse(readFileSync(process.argv[2], 'utf8'));
let jwksFetches = 0;
// Back-channel logouts sent, by outcome (GET /test/backchannel answers them).
const backchannel = { ok: 0, error: [] };
const ca = settings.caFile ? readFileSync(settings.caFile, 'utf8') : undefined;

// The provider's outgoing requests (back-channel logouts to the gateway under test, on loopback HTTPS
// with a certificate of the test CA). The provider's default fetch refuses special-use addresses
// (loopback among them) as SSRF protection; the tests' gateways live there.
function loopbackFetch(url, options) {
  return new Promise((resolve, reject) => {
    const body = options.body === undefined || options.body === null ? undefined : String(options.body);
    const headers = {};
    new Headers(options.headers).forEach((v, k) => { headers[k] = v; });
    const req = httpsRequest(url, { method: options.method ?? 'GET', headers, ca, timeout: 5000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve(new Response(res.statusCode === 204 ? null : Buffer.concat(chunks), { status: res.statusCode })));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}
let handler = (_req, res) => {
  res.statusCode = 503;
  res.end();
};

const server = createServer({ cert: readFileSync(settings.certFile), key: readFileSync(settings.keyFile) }, (req, res) => {
  if (req.url === '/test/backchannel') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(backchannel));
    return;
  }
  if (req.url === '/test/jwks-fetches') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ count: jwksFetches }));
    return;
  }
  if (req.method === 'GET' && req.url.split('?')[0] === '/jwks') {
    jwksFetches++;
    if (settings.jwksCacheControl) res.setHeader('cache-control', settings.jwksCacheControl);
  }
  handler(req, res);
});

server.listen(settings.port ?? 0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `https://127.0.0.1:${port}`;
  const accounts = settings.accounts ?? {};
  const provider = new Provider(issuer, {
    jwks: { keys: settings.jwks },
    clients: settings.clients,
    fetch: loopbackFetch,
    cookies: { keys: ['test-cookie-key-test-cookie-key-0123'] },
    // Any login name at the development form is an account; its claims come from the settings.
    findAccount: (_ctx, sub) => ({
      accountId: sub,
      claims: () => ({ sub, ...(accounts[sub] ?? {}) }),
    }),
    claims: { openid: ['sub'], profile: ['preferred_username', 'name'], email: ['email'], groups: ['groups'] },
    // Claims a JWT access token carries beside the standard ones: per account (code flow) or client (client credentials).
    extraTokenClaims: (_ctx, token) => {
      if (token.accountId) return accounts[token.accountId] ?? undefined;
      return settings.clientClaims?.[token.clientId] ?? undefined;
    },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      backchannelLogout: { enabled: true },
      rpInitiatedLogout: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          const rs = settings.resources[resource];
          if (!rs) throw new errors.InvalidTarget();
          return { scope: 'api', audience: rs.audience ?? resource, accessTokenTTL: rs.ttl ?? 600, accessTokenFormat: 'jwt', jwt: { sign: { alg: rs.alg ?? 'RS256' } } };
        },
      },
    },
    ttl: { Session: 3600, Grant: 3600, AccessToken: 600, IdToken: 600, Interaction: 600, AuthorizationCode: 60 },
  });
  provider.on('backchannel.success', () => { backchannel.ok++; });
  provider.on('backchannel.error', (_ctx, err) => {
    backchannel.error.push(String(err?.message ?? err));
    process.stderr.write(`backchannel.error ${err?.stack ?? err}\n`);
  });
  provider.on('server_error', (_ctx, err) => process.stderr.write(`server_error ${err.stack}\n`));
  handler = provider.callback();
  process.stdout.write(`${JSON.stringify({ listening: port, issuer })}\n`);
});

process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
