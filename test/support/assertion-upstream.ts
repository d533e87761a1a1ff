import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';

interface Verified {
  ok: boolean;
  /** The claims, when the assertion verified. */
  claims?: JWTPayload & { groups?: string[]; via?: string };
  kid?: string;
  error?: string;
  token?: string;
  headers: IncomingHttpHeaders;
}

export interface AssertionUpstream {
  url: string;
  server: Server;
  seen: Verified[];
  close(): Promise<void>;
}

/**
 * An upstream as its operators would write one: it trusts nothing about the network and verifies the
 * identity assertion of every request with a standard library (jose's remote JWK Set against the
 * gateway's /.well-known/jwks.json), pinned to the issuer, its own audience and the algorithm. It
 * answers 200 with what it verified (or 401), and records it.
 */
export async function assertionUpstream(options: { jwksUrl: () => string; audience: string; alg: string; header?: string; issuer?: string; cooldownMs?: number }): Promise<AssertionUpstream> {
  const seen: Verified[] = [];
  let jwks: ReturnType<typeof createRemoteJWKSet> | undefined;
  const header = (options.header ?? 'x-identity-assertion').toLowerCase();
  const server = createServer((req, res) => {
    void (async () => {
      jwks ??= createRemoteJWKSet(new URL(options.jwksUrl()), { cooldownDuration: options.cooldownMs ?? 30_000 });
      const token = req.headers[header];
      let v: Verified;
      try {
        if (typeof token !== 'string') throw new Error('no assertion');
        const { payload, protectedHeader } = await jwtVerify(token, jwks, { issuer: options.issuer ?? 'auth-gateway', audience: options.audience, algorithms: [options.alg], requiredClaims: ['sub', 'exp', 'iat'] });
        v = { ok: true, claims: payload, kid: protectedHeader.kid, token, headers: req.headers };
      } catch (err) {
        v = { ok: false, error: (err as Error).message, token: typeof token === 'string' ? token : undefined, headers: req.headers };
      }
      seen.push(v);
      req.resume();
      res.writeHead(v.ok ? 200 : 401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: v.ok, sub: v.claims?.sub, error: v.error }));
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    server,
    seen,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
