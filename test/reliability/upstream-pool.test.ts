import { request } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startNode, waitForHttp, type Child } from '../support/process.js';
import { basic, htpasswd, startGateway, testConfig, type RunningGateway, type Users } from '../support/fixtures.js';

// Upstream pools against real upstream processes: balancing, passive and active health, failover
// under load with one target of two killed and restarted.

const ALICE = basic('alice', 'alice-pw');

/** A real upstream process: answers with its name; `/slow` holds the answer 300 ms; `/healthz` 200. */
const UPSTREAM = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const answer = () => { res.setHeader('content-type', 'text/plain'); res.end(process.env.NAME); };
    if (req.url.startsWith('/slow')) setTimeout(answer, 300); else answer();
  });
});
server.keepAliveTimeout = 5000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('listening ' + server.address().port));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;

interface Upstream {
  name: string;
  port: number;
  url: string;
  child?: Child;
  start(): Promise<void>;
  kill(): Promise<void>;
}

/**
 * Started first on port 0 (the port it got is read from its output), restarted on that same port: the
 * gateway's configuration names it. A restart that finds the port taken in the instant after the kill
 * tries again, a bounded number of times.
 */
async function upstream(name: string): Promise<Upstream> {
  const u: Upstream = {
    name,
    port: 0,
    url: '',
    start: async () => {
      for (let attempt = 0; ; attempt++) {
        const child = startNode('-e', [UPSTREAM], { NAME: name, PORT: String(u.port) });
        const deadline = Date.now() + 10_000;
        let port: number | undefined;
        while (port === undefined && child.proc.exitCode === null && Date.now() < deadline) {
          port = Number(/^listening (\d+)$/m.exec(child.output())?.[1]) || undefined;
          if (port === undefined) await new Promise((r) => setTimeout(r, 20));
        }
        if (port !== undefined) {
          u.child = child;
          u.port = port;
          u.url = `http://127.0.0.1:${port}`;
          await waitForHttp(`${u.url}/healthz`, child);
          return;
        }
        await child.stop('SIGKILL');
        if (attempt >= 10) throw new Error(`upstream ${name} did not start on port ${u.port}:\n${child.output()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    kill: async () => {
      await u.child?.stop('SIGKILL');
      u.child = undefined;
    },
  };
  await u.start();
  return u;
}

let users: Users;
let a: Upstream;
let b: Upstream;
let gw: RunningGateway | undefined;

beforeAll(async () => {
  users = htpasswd({ alice: 'alice-pw' });
  [a, b] = await Promise.all([upstream('a'), upstream('b')]);
});
afterEach(async () => {
  await gw?.close();
  gw = undefined;
  if (!b.child) await b.start();
  if (!a.child) await a.start();
});
afterAll(async () => {
  await a?.kill();
  await b?.kill();
  users?.remove();
});

async function start(upstreamConfig: Record<string, unknown>) {
  gw = await startGateway(testConfig(users.file, {
    upstreams: { pool: { targets: [a.url, b.url], ...upstreamConfig } },
    routes: [{ path: '/v1/pool', upstream: 'pool' }],
  }));
}

function call(path: string, method = 'GET', body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request(`${gw!.base}${path}`, { method, headers: { authorization: ALICE } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      res.on('error', () => resolve({ status: -1, body: 'response error' }));
    });
    req.on('error', (err) => resolve({ status: -1, body: err.message }));
    req.end(body);
  });
}

const tally = (bodies: string[]) => bodies.reduce<Record<string, number>>((t, x) => ({ ...t, [x]: (t[x] ?? 0) + 1 }), {});

describe('upstream pools', () => {
  it('round-robin spreads requests evenly over the targets', async () => {
    await start({});
    const bodies: string[] = [];
    for (let i = 0; i < 10; i++) bodies.push((await call('/v1/pool/x')).body);
    expect(tally(bodies)).toEqual({ a: 5, b: 5 });
  });

  it('least-requests sends fewer requests to the target that is busy', async () => {
    await start({ balance: 'least-requests' });
    // Hold two slow requests on one target, then see where the quick ones go meanwhile.
    const slow = [call('/v1/pool/slow'), call('/v1/pool/slow')];
    await new Promise((r) => setTimeout(r, 50));
    const quick: string[] = [];
    for (let i = 0; i < 6; i++) quick.push((await call('/v1/pool/x')).body);
    const held = (await Promise.all(slow)).map((r) => r.body);
    // The two slow ones went one to each (a tie, then the other); quick ones never queue behind them.
    expect(new Set(held).size).toBe(2);
    expect(quick.length).toBe(6);
    expect(Object.values(tally(quick)).every((n) => n === 3)).toBe(true);
  });

  it('a target that refuses connections is skipped for the cool-down; a bodiless request that hit it is retried on the other', async () => {
    await start({ cooldownMs: 60_000 });
    await b.kill();
    const answers = await Promise.all(Array.from({ length: 10 }, () => call('/v1/pool/x')));
    expect(answers.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(tally(answers.map((r) => r.body))).toEqual({ a: 10 });
  });

  it('a request with a body is never sent twice: refused → 502, and the target is skipped from then on', async () => {
    await start({ cooldownMs: 60_000 });
    await b.kill();
    expect(await call('/v1/pool/x')).toEqual({ status: 200, body: 'a' });
    // Round-robin picks b next: the body was streamed into the refused attempt, so it cannot be replayed.
    const refused = await call('/v1/pool/upload', 'POST', 'payload');
    expect(refused.status).toBe(502);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'bad_gateway' });
    // b is cooling down now: the next one goes to a.
    expect(await call('/v1/pool/upload', 'POST', 'payload')).toEqual({ status: 200, body: 'a' });
  });

  it('one target of two killed and restarted under load: no client sees an error, and the restarted target serves again', async () => {
    await start({ cooldownMs: 500, healthCheck: { path: '/healthz', intervalMs: 200, timeoutMs: 200 } });
    const results: Array<{ status: number; body: string; at: number }> = [];
    const started = Date.now();
    let running = true;
    const client = async () => {
      while (running) {
        const r = await call('/v1/pool/x');
        results.push({ ...r, at: Date.now() - started });
      }
    };
    const clients = Array.from({ length: 6 }, client);
    await new Promise((r) => setTimeout(r, 500));
    await b.kill();
    const killedAt = Date.now() - started;
    await new Promise((r) => setTimeout(r, 1000));
    // b may serve again as soon as it listens (start() waits for that, and so may the health check).
    const restartingAt = Date.now() - started;
    await b.start();
    const restartedAt = Date.now() - started;
    await new Promise((r) => setTimeout(r, 1500));
    running = false;
    await Promise.all(clients);

    const errors = results.filter((r) => r.status !== 200);
    expect(errors, JSON.stringify(errors.slice(0, 5))).toEqual([]);
    expect(results.length).toBeGreaterThan(100);
    expect(results.filter((r) => r.at > killedAt + 100 && r.at < restartingAt).every((r) => r.body === 'a')).toBe(true);
    // Back in rotation within the health check's interval of its restart.
    expect(results.filter((r) => r.at > restartedAt + 500 && r.body === 'b').length).toBeGreaterThan(10);
  }, 20_000);
});
