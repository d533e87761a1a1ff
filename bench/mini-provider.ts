// A small OpenID provider on loopback http for the bench: discovery and a JWK Set (one RSA key,
// max-age 3600), and RS256 access tokens signed here. The gateway fetches its keys once; what a row
// measures is the gateway verifying (or, for the other sources' rows, merely having configured) an
// issuer it holds keys for. bench/openid.ts sends its tokens; the rows "with API keys and an issuer
// configured" (bench/variants.ts, bench/edge.ts) and `npm run bench:instructions` configure it only.
import { generateKeyPairSync, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';

/** The audience the bench's issuer entries accept and its tokens carry. */
const PROVIDER_AUDIENCE = 'gateway-api';

export interface MiniProvider {
  issuer: string;
  /** An RS256 access token for `user` (preferred_username), groups [staff], valid for an hour. */
  token: (user: string) => string;
  close: () => Promise<void>;
}

export async function miniProvider(): Promise<MiniProvider> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = 'bench-rsa';
  let issuer = '';
  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration') {
      res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks`, authorization_endpoint: `${issuer}/auth`, token_endpoint: `${issuer}/token`, response_types_supported: ['code'], subject_types_supported: ['public'], id_token_signing_alg_values_supported: ['RS256'] }));
    } else if (req.url === '/jwks') {
      res.setHeader('cache-control', 'public, max-age=3600');
      res.end(JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' }] }));
    } else {
      res.statusCode = 404;
      res.end('{}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return {
    issuer,
    token: (user) => {
      const now = Math.floor(Date.now() / 1000);
      const input = `${b64({ alg: 'RS256', typ: 'at+jwt', kid })}.${b64({ iss: issuer, aud: PROVIDER_AUDIENCE, sub: 'u-1', preferred_username: user, groups: ['staff'], iat: now, exp: now + 3600 })}`;
      return `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The `identity.issuers` entry of the bench's provider (YAML flow mapping). */
export function issuerEntry(issuer: string): string {
  return `{ name: bench, issuer: "${issuer}", audiences: [${PROVIDER_AUDIENCE}], algorithms: [RS256], userClaim: preferred_username, groupsClaim: groups }`;
}
