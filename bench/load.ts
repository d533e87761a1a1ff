// Runs autocannon in its own process (so the load generator never shares the orchestrator's event
// loop) and prints one JSON LoadResult line on stdout. Usage: node load.js '<LoadSpec JSON>'.
import autocannon, { type Client, type Options, type RequestSpec } from 'autocannon';
import { Samples, type LoadResult } from './stats.js';

export interface LoadSpec {
  /** Origin, e.g. http://127.0.0.1:8080 (the bench only ever targets 127.0.0.1). */
  origin: string;
  path: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  connections: number;
  /** Seconds; ignored when amount is set. */
  duration?: number;
  /** Total requests, then stop. */
  amount?: number;
  /**
   * fixed: the same request every time. refresh: each connection rotates its own refresh token
   * (POST /v1/tokens/refresh with the token from the previous answer). create: POST /v1/tokens/create
   * with a new user name each time (`${userPrefix}${n}`), so every request costs a real bcrypt.
   */
  mode?: 'fixed' | 'refresh' | 'create';
  refreshTokens?: string[];
  userPrefix?: string;
  userStart?: number;
  password?: string;
}

export interface LoadOutput extends LoadResult {
  /** create: user names consumed; refresh: connections whose chain broke (a non-200 answer). */
  usersUsed?: number;
  brokenChains?: number;
}

const JSON_HEADERS = { 'content-type': 'application/json' };

function main(): void {
  const spec = JSON.parse(process.argv[2] ?? '') as LoadSpec;
  if (!spec.origin.startsWith('http://127.0.0.1:')) throw new Error(`refusing to load ${spec.origin}: 127.0.0.1 only`);
  const samples = new Samples();
  const statusCodes: Record<string, number> = {};
  let nextUser = spec.userStart ?? 0;
  let nextToken = 0;
  let brokenChains = 0;

  const options: Options = {
    url: spec.origin + spec.path,
    connections: spec.connections,
    method: spec.method ?? 'GET',
    headers: spec.headers ?? {},
    body: spec.body,
    timeout: 10,
  };
  if (spec.amount) options.amount = spec.amount;
  else options.duration = spec.duration ?? 10;

  if (spec.mode === 'refresh') {
    const tokens = spec.refreshTokens ?? [];
    if (tokens.length < spec.connections) throw new Error('refresh mode needs one refresh token per connection');
    options.requests = [{ method: 'POST', path: spec.path, headers: JSON_HEADERS, body: '{}' }];
    options.setupClient = (client: Client) => {
      let token = tokens[nextToken++]!;
      let broken = false;
      const request: RequestSpec = {
        method: 'POST',
        path: spec.path,
        headers: JSON_HEADERS,
        setupRequest: (req) => ({ ...req, body: JSON.stringify({ refreshToken: token }) }),
        onResponse: (status, body) => {
          if (status === 200) token = (JSON.parse(body) as { refreshToken: string }).refreshToken;
          else if (!broken) {
            broken = true;
            brokenChains++;
          }
        },
      };
      client.setRequests([request]);
    };
  } else if (spec.mode === 'create') {
    const body = () => JSON.stringify({ appKey: `${spec.userPrefix}${nextUser++}`, appSecret: spec.password });
    options.requests = [{ method: 'POST', path: spec.path, headers: JSON_HEADERS, setupRequest: (req) => ({ ...req, body: body() }) }];
  }

  const instance = autocannon(options, (err, result) => {
    if (err) throw err;
    const p = samples.percentiles();
    const ok = result['2xx'];
    const out: LoadOutput = {
      total: samples.count,
      ok,
      durationS: result.duration,
      rps: ok / result.duration,
      ...p,
      non2xx: result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
      statusCodes,
    };
    if (spec.mode === 'create') out.usersUsed = nextUser - (spec.userStart ?? 0);
    if (spec.mode === 'refresh') out.brokenChains = brokenChains;
    process.stdout.write(`${JSON.stringify(out)}\n`);
    process.exit(0);
  });
  instance.on('response', (_client, statusCode, _bytes, ms) => {
    samples.push(ms);
    statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
  });
  process.once('SIGTERM', () => instance.stop());
}

main();
