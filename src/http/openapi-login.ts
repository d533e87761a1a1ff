import type { Config } from '../config/types.js';

type Json = Record<string, unknown>;

const problem = (description: string, schema: Json = { $ref: '#/components/schemas/Problem' }) => ({ description, content: { 'application/problem+json': { schema } } });
const redirect = (description: string) => ({ description, headers: { Location: { description: 'where the browser goes next', schema: { type: 'string' } }, 'Set-Cookie': { description: 'the sign-in cookies', schema: { type: 'string' } } } });

/** The OpenAPI paths of browser sign-in (`login`): the callback, sign-out, back-channel logout and the sign-in page. */
export function loginPaths(config: Config): Json {
  const login = config.login;
  if (!login) return {};
  const callback = {
    operationId: 'signInCallback',
    summary: 'Where the OpenID provider sends the browser back after sign-in (authorization code flow with PKCE); with only `rd`, starts a sign-in.',
    description: `With \`code\` and \`state\`: checks the state against the sign-in cookie (${login.cookieName}-login-<id>), exchanges the code, verifies the ID token, creates a gateway session and sets the session cookie (${login.cookieName}), then 302 to the page the sign-in began on. With \`rd\` alone (the Location of a forward-auth 401): 302 to the provider's authorization endpoint.`,
    security: [],
    parameters: ['code', 'state', 'error', 'error_description', 'iss', 'rd', 'provider'].map((name) => ({ name, in: 'query', required: false, schema: { type: 'string' } })),
    responses: {
      302: redirect('to the provider (a sign-in starts) or back to the original page (signed in)'),
      400: problem('invalid_request: no sign-in in progress in this browser, or the provider\'s answer did not check out'),
      403: problem('forbidden: the provider refused the sign-in, did not name the user, or named one the gateway cannot carry (a control character, a lone surrogate, over 256 characters)'),
      503: problem('identity_provider_unavailable or store_unavailable'),
    },
  };
  const html = (description: string) => ({ description, content: { 'text/html': { schema: { type: 'string' } } } });
  const logout = {
    operationId: 'signOutPage',
    summary: 'A page asking to confirm sign-out, whose form posts to this path (a link from another site signs nobody out).',
    security: [],
    responses: { 200: html('the page (Content-Security-Policy without script; sets the form cookie)') },
  };
  const logoutPost = {
    operationId: 'signOut',
    summary: 'From the gateway\'s own page (Origin and the form token): ends the browser\'s gateway session on every instance, clears the cookie, then 303 to the provider\'s end_session_endpoint (id_token_hint, post_logout_redirect_uri, state) or to login.postLogoutRedirectUri.',
    security: [],
    requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', required: ['csrf'], properties: { csrf: { type: 'string' } } } } } },
    responses: { 303: redirect('to the provider\'s end-session page, or where sign-out lands'), 403: problem('forbidden: posted from another origin, or without the page\'s form token'), 415: problem('unsupported_media_type: not a form'), 503: problem('store_unavailable') },
  };
  const signInGet = {
    operationId: 'signInPage',
    summary: 'The sign-in page: the form of the gateway\'s own users (login.local) and a button per provider; `rd` is the same-origin path to go back to.',
    security: [],
    parameters: [{ name: 'rd', in: 'query', required: false, schema: { type: 'string' } }],
    responses: { 200: html('the page (Content-Security-Policy without script; sets the form cookie)') },
  };
  const signInPost = {
    operationId: 'signInLocal',
    summary: 'The form of the gateway\'s own users: checked like Basic (same lockout); on success a store session and the session cookie, then 303 to `rd`. A browser (Accept: text/html) gets the page again with what went wrong; another client the problem.',
    security: [],
    requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', required: ['username', 'password', 'csrf'], properties: { username: { type: 'string' }, password: { type: 'string' }, csrf: { type: 'string' }, rd: { type: 'string' } } } } } },
    responses: {
      200: html('the page again, saying what went wrong (a browser)'),
      303: redirect('signed in: back to `rd`'),
      401: problem('invalid_credentials (not a browser)'),
      403: problem('forbidden: posted from another origin, or without the page\'s form token'),
      415: problem('unsupported_media_type: not a form'),
      429: problem('too_many_attempts (not a browser)'),
      503: problem('store_unavailable or directory_unavailable (not a browser)'),
    },
  };
  const errorBody = {
    allOf: [{ $ref: '#/components/schemas/Problem' }, { type: 'object', required: ['error'], properties: { error: { const: 'invalid_request' }, error_description: { type: 'string' } } }],
  };
  const backchannel = {
    operationId: 'backchannelLogout',
    summary: 'OpenID Connect Back-Channel Logout 1.0: the provider ends a session; every gateway session of it (sid) or of its user (sub) is revoked on every instance before the 200.',
    security: [],
    requestBody: {
      required: true,
      content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', required: ['logout_token'], properties: { logout_token: { type: 'string', description: 'a JWT signed by the provider (iss, aud = the client id, iat, the back-channel logout event, sid or sub, no nonce)' } } } } },
    },
    responses: {
      200: { description: 'the sessions are revoked (Cache-Control: no-store); empty body' },
      400: problem('invalid_request: the logout token is missing or not valid; the body carries the spec\'s `error` too', errorBody),
      408: problem('request_timeout'),
      413: problem('payload_too_large'),
      415: problem('unsupported_media_type: not a form'),
      503: problem('identity_provider_unavailable (no key of the provider known) or store_unavailable'),
    },
  };
  const meGet = {
    operationId: 'me',
    summary: 'The signed-in person: user, groups, how they signed in, and their sessions (created, last refreshed, the address and device signed in from). A page, or JSON with Accept: application/json; a bearer token of the gateway gets the JSON of its own session.',
    security: [],
    responses: {
      200: { description: 'the page, or the JSON', content: { 'text/html': { schema: { type: 'string' } }, 'application/json': { schema: { type: 'object', required: ['user', 'groups', 'signedInWith', 'sessions'], properties: { user: { type: 'string' }, groups: { type: 'array', items: { type: 'string' } }, signedInWith: { type: 'string' }, sessions: { type: 'array', items: { type: 'object', required: ['id', 'createdAt', 'lastRefreshedAt', 'address', 'device', 'current'], properties: { id: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' }, lastRefreshedAt: { type: 'string', format: 'date-time' }, address: { type: 'string', description: 'the client address it was signed in from, or unknown' }, device: { type: 'string', description: 'a short label of the browser it was signed in from (read from its User-Agent), or unknown' }, current: { type: 'boolean' } } } } } } } } },
      302: redirect('a browser without a session: to sign in'),
      401: problem('missing_credentials or invalid_token (not a browser)'),
    },
  };
  const mePost = {
    operationId: 'endSessions',
    summary: 'From the page (Origin and the form token): ends one of the user\'s sessions (`end` = its id) or all but this one (`end=others`) on every instance, then 303 back to the page.',
    security: [],
    requestBody: { required: true, content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', required: ['csrf', 'end'], properties: { csrf: { type: 'string' }, end: { type: 'string' } } } } } },
    responses: { 303: redirect('back to the page'), 401: problem('missing_credentials: no session'), 403: problem('forbidden: another origin, no form token, or a bearer token'), 415: problem('unsupported_media_type: not a form') },
  };
  return {
    [login.callbackPath]: { get: callback },
    [login.mePath]: { get: meGet, post: mePost },
    [login.logoutPath]: { get: logout, post: logoutPost },
    ...(login.issuer !== undefined ? { [login.backchannelLogoutPath]: { post: backchannel } } : {}),
    ...(login.local || login.issuer === undefined ? { [login.signInPath]: { get: signInGet, post: signInPost } } : {}),
  };
}
