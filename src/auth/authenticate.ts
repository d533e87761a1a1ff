import type { PasswordCheck } from '../credentials/password-check.js';
import { HttpProblem, REALM } from '../http/problem.js';
import type { GatewayContext, GatewayMiddleware, Principal } from '../http/state.js';
import type { TokenService } from '../tokens/service.js';
import { parseAuthorization, type Credentials } from './authorization-header.js';

export const BASIC_CHALLENGE = `Basic realm="${REALM}", charset="UTF-8"`;
export const BEARER_CHALLENGE = `Bearer realm="${REALM}"`;

/** Every request that reaches it must carry Basic or Bearer credentials; sets ctx.state.principal. */
export function authenticate(passwords: PasswordCheck, tokens: TokenService): GatewayMiddleware {
  return async function authenticateRequest(ctx, next) {
    const credentials = readCredentials(ctx);
    ctx.state.principal = await verify(credentials, ctx, passwords, tokens);
    await next();
  };
}

function readCredentials(ctx: GatewayContext): Credentials {
  const header = ctx.req.headers.authorization;
  if (header === undefined) {
    throw challenge('missing_credentials', 'credentials are required: Authorization: Basic or Bearer', [BASIC_CHALLENGE, BEARER_CHALLENGE]);
  }
  if (countHeader(ctx.req.rawHeaders, 'authorization') > 1) {
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
    const { user } = await tokens.verifyAccessToken(credentials.token);
    return { user, via: 'bearer' };
  }
  try {
    await passwords.check({ user: credentials.user, password: credentials.password, address: ctx.ip }, { trustCache: true });
  } catch (err) {
    if (err instanceof HttpProblem && err.status === 401) err.headers['WWW-Authenticate'] = BASIC_CHALLENGE;
    throw err;
  }
  return { user: credentials.user, via: 'basic' };
}

function challenge(code: 'missing_credentials' | 'invalid_credentials' | 'invalid_token', detail: string, challenges: string[]): HttpProblem {
  return new HttpProblem(401, code, detail, { headers: { 'WWW-Authenticate': challenges } });
}

function countHeader(raw: string[], name: string): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === name.length && raw[i]!.toLowerCase() === name) n++;
  return n;
}
