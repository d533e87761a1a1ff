import { STATUS_CODES } from 'node:http';

/** Every code the gateway can answer with; the `code` member of a problem body. */
export type ProblemCode =
  | 'invalid_request'
  | 'request_timeout'
  | 'expectation_failed'
  | 'malformed_json'
  | 'unsupported_media_type'
  | 'payload_too_large'
  | 'method_not_allowed'
  | 'not_found'
  | 'invalid_path'
  | 'uri_too_long'
  | 'headers_too_large'
  | 'missing_credentials'
  | 'invalid_credentials'
  | 'invalid_token'
  | 'token_expired'
  | 'invalid_refresh_token'
  | 'forbidden'
  | 'too_many_attempts'
  | 'rate_limited'
  | 'websocket_not_allowed'
  | 'cors_not_allowed'
  | 'invalid_page_size'
  | 'invalid_page'
  | 'invalid_sort'
  | 'store_unavailable'
  | 'identity_provider_unavailable'
  | 'directory_unavailable'
  | 'bad_gateway'
  | 'gateway_timeout'
  | 'service_unavailable'
  | 'internal_error';

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  [extension: string]: unknown;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * The one error class of the gateway. Koa's own `onerror` reads `status`, `expose` and `headers`,
 * so a stray HttpProblem that escapes our handler is still answered with the right status.
 */
export class HttpProblem extends Error {
  readonly status: number;
  readonly code: ProblemCode;
  readonly expose: boolean;
  readonly headers: Record<string, string | string[]>;
  readonly extensions: Record<string, unknown>;

  constructor(
    status: number,
    code: ProblemCode,
    detail: string,
    options: { headers?: Record<string, string | string[]>; extensions?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HttpProblem';
    this.status = status;
    this.code = code;
    this.expose = status < 500;
    this.headers = options.headers ?? {};
    this.extensions = options.extensions ?? {};
  }

  toBody(): ProblemBody {
    return problemBody(this.status, this.code, this.message, this.extensions);
  }
}

export function problemBody(
  status: number,
  code: ProblemCode,
  detail: string,
  extensions: Record<string, unknown> = {},
): ProblemBody {
  return {
    ...extensions,
    type: `urn:auth-gateway:problem:${code}`,
    title: STATUS_CODES[status] ?? 'Error',
    status,
    detail,
    code,
  };
}

/** A fresh 503 for what arrives while the gateway stops (readiness, new handshakes). */
export function shuttingDown(): HttpProblem {
  return new HttpProblem(503, 'service_unavailable', 'the gateway is shutting down', { headers: { 'Retry-After': '1' } });
}

/** A fresh 500 that says nothing internal. */
export function internalError(): HttpProblem {
  return new HttpProblem(500, 'internal_error', 'internal error');
}

/** The realm named in every WWW-Authenticate challenge. */
export const REALM = 'auth-gateway';
