import type { PasswordCheck } from '../credentials/password-check.js';
import { HttpProblem, REALM } from '../http/problem.js';
import type { GatewayContext } from '../http/state.js';
import type { TokenService } from '../tokens/service.js';
import { parseAuthorization, type Credentials } from './authorization-header.js';
import type { Principal } from './principal.js';

export const BASIC_CHALLENGE = `Basic realm="${REALM}", charset="UTF-8"`;
export const BEARER_CHALLENGE = `Bearer realm="${REALM}"`;

/**
 * The authenticate step: every request that reaches it carries Basic or Bearer credentials, verified
 * here once; sets ctx.state.principal (and, for Basic, ctx.state.triedUser before the check, so a
 * refusal's access line names the user name that was tried).
 */
export function authenticate(passwords: PasswordCheck, tokens: TokenService): (ctx: GatewayContext) => Promise<void> {
  return async function authenticateRequest(ctx) {
    const credentials = readCredentials(ctx);
    ctx.state.principal = await verify(credentials, ctx, passwords, tokens);
  };
}

function readCredentials(ctx: GatewayContext): Credentials {
  const header = ctx.req.headers.authorization;
  if (header === undefined) {
    throw challenge('missing_credentials', 'credentials are required: Authorization: Basic or Bearer', [BASIC_CHALLENGE, BEARER_CHALLENGE]);
  }
  if (ctx.state.repeatedAuthorization) {
    throw new HttpProblem(400, 'invalid_request', 'the request carries more than one Authorization header');
  }
  const parsed = parseAuthorization(header);
  if (parsed.ok) return parsed.credentials;
  if (parsed.scheme === 'bearer') {
    throw challenge('invalid_token', parsed.reason, [`${BEARER_CHALLENGE}, error="invalid_request"`]);
  }
  const challenges = parsed.scheme === 'basic' ? [BASIC_CHALLENGE] : [BASIC_CHALLENGE, BEARER_CHALLENGE];
  throw challenge('invalid_credentials', parsed.reason, challenges);
}

async function verify(credentials: Credentials, ctx: GatewayContext, passwords: PasswordCheck, tokens: TokenService): Promise<Principal> {
  if (credentials.scheme === 'bearer') {
    const { user, sid, exp } = await tokens.verifyAccessToken(credentials.token);
    return { via: 'bearer', user, sid, exp, token: credentials.token };
  }
  ctx.state.triedUser = credentials.user;
  try {
    await passwords.check({ user: credentials.user, password: credentials.password, address: ctx.ip }, { trustCache: true });
  } catch (err) {
    if (err instanceof HttpProblem && err.status === 401) err.headers['WWW-Authenticate'] = BASIC_CHALLENGE;
    throw err;
  }
  return { via: 'basic', user: credentials.user };
}

function challenge(code: 'missing_credentials' | 'invalid_credentials' | 'invalid_token', detail: string, challenges: string[]): HttpProblem {
  return new HttpProblem(401, code, detail, { headers: { 'WWW-Authenticate': challenges } });
}
