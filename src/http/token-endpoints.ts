import Router from '@koa/router';
import { HttpProblem } from './problem.js';
import { jsonBody, requireStrings } from './json-body.js';
import type { GatewayContext, GatewayMiddleware, GatewayState } from './state.js';
import type { TokenService, TokenType } from '../tokens/service.js';

const TOKEN_BODY_LIMIT_BYTES = 16 * 1024;
const TOKEN_TYPES: readonly TokenType[] = ['ACCESS_TOKEN', 'REFRESH_TOKEN'];

/** POST /v1/tokens/create | refresh | revoke, each a short list of named steps. */
/**
 * `subjectOf` names the user of an access token (good signature, expired or not) for the access line:
 * create logs the user name tried, refresh the user of the new pair, revoke the user of the session ended
 * (or of an access token whose session was gone already).
 */
export function tokenRoutes(tokens: TokenService, bodyTimeoutMs: number, subjectOf: (accessToken: string) => string | undefined = () => undefined): Router<GatewayState> {
  // Exact paths only: /v1/tokens/CREATE or /v1/tokens/create/ are no token endpoint.
  const router = new Router<GatewayState>({ prefix: '/v1/tokens', sensitive: true, strict: true });
  const body = jsonBody(TOKEN_BODY_LIMIT_BYTES, bodyTimeoutMs);

  router.post('/create', noStore, body, async function createToken(ctx) {
    const { appKey, appSecret } = requireStrings(ctx.state.body, 'appKey', 'appSecret');
    ctx.state.triedUser = appKey;
    // Over a verified client certificate the pair is bound to it (RFC 8705 §3).
    ctx.body = await tokens.create({ user: appKey, password: appSecret, address: ctx.state.address }, ctx.state.certificate);
  });

  router.post('/refresh', noStore, body, async function refreshToken(ctx) {
    const { refreshToken } = requireStrings(ctx.state.body, 'refreshToken');
    const pair = await tokens.refresh(refreshToken, ctx.state.certificate);
    ctx.state.triedUser = subjectOf(pair.accessToken);
    ctx.body = pair;
  });

  router.post('/revoke', noStore, body, async function revokeToken(ctx) {
    const { token, type } = requireStrings(ctx.state.body, 'token', 'type');
    const kind = tokenType(type);
    // The user of an access token, even when the answer is an error; the user of the session ended, for a
    // refresh token (which names no user itself).
    ctx.state.triedUser = subjectOf(token);
    ctx.state.triedUser = (await tokens.revoke(token, kind)) ?? ctx.state.triedUser;
    // 200 with an empty body (spec section 4): an explicit null body, then the status.
    ctx.body = null;
    ctx.status = 200;
  });

  for (const path of ['/create', '/refresh', '/revoke']) router.all(path, methodNotAllowed);
  router.all('/{*rest}', notFound);
  return router;
}

/** Token responses must never be cached (RFC 6749 section 5.1). */
const noStore: GatewayMiddleware = async function noStore(ctx, next) {
  ctx.set('Cache-Control', 'no-store');
  await next();
};

function tokenType(type: string): TokenType {
  if ((TOKEN_TYPES as readonly string[]).includes(type)) return type as TokenType;
  throw new HttpProblem(400, 'invalid_request', `type must be one of ${TOKEN_TYPES.join(', ')}`);
}

async function methodNotAllowed(ctx: GatewayContext): Promise<void> {
  throw new HttpProblem(405, 'method_not_allowed', `${ctx.method} is not allowed here; use POST`, { headers: { Allow: 'POST' } });
}

async function notFound(ctx: GatewayContext): Promise<void> {
  throw new HttpProblem(404, 'not_found', `${ctx.path} is not a token endpoint (create, refresh, revoke)`);
}
