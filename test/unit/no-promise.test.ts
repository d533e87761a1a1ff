import { createHook } from 'node:async_hooks';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Forwarder } from '../../src/proxy/forward.js';
import { createGateway, type Gateway } from '../../src/server.js';
import { basic, htpasswd, testConfig, type Users } from '../support/fixtures.js';

/**
 * The lean path: a request whose every answer is known at once (the access token verified before, its
 * session known live; a Basic password verified moments ago) reaches the forward without a single
 * promise made on the way. The gateway is driven without a port: a request and response on an
 * unconnected socket, handed to the server's request listener; the Forwarder's forward is replaced by
 * one that only records how many promises had been made when it was called.
 */
describe('a request with warm caches', () => {
  let users: Users;
  let gateway: Gateway;
  let accessToken: string;
  const original = Forwarder.prototype.forward;
  let promisesAtForward: number | undefined;
  let promises = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') promises++;
    },
  });

  beforeAll(async () => {
    users = htpasswd({ alice: 'alice-password' });
    gateway = createGateway(testConfig(users.file, {
      upstreams: { list: { url: 'http://127.0.0.1:9' } },
      routes: [{ path: '/v1/conversations', upstream: 'list', paging: { sortable: ['createdAt'] } }],
      apiKeys: {},
    }));
    Forwarder.prototype.forward = function recorded() {
      promisesAtForward = promises;
      return undefined as unknown as Promise<void>;
    };
    ({ accessToken } = await gateway.tokens.create({ user: 'alice', password: 'alice-password', address: '127.0.0.1' }));
  });

  afterAll(async () => {
    Forwarder.prototype.forward = original;
    await gateway.close(0);
    users.remove();
  });

  /** Hands one request to the gateway's request listener; resolves when its response is finished or it was forwarded. */
  function send(authorization: string): void {
    const socket = new Socket();
    const req = new IncomingMessage(socket);
    req.method = 'GET';
    req.url = '/v1/conversations?size=10&sort=createdAt,DESC';
    req.httpVersionMajor = 1;
    req.httpVersionMinor = 1;
    req.httpVersion = '1.1';
    req.rawHeaders = ['Host', 'gw.example', 'Authorization', authorization];
    req.headers = { host: 'gw.example', authorization };
    req.push(null);
    const res = new ServerResponse(req);
    gateway.server.emit('request', req, res);
  }

  /**
   * Promises made from the request's arrival to the forward. `warm`: the same request is sent once
   * before, so its caches are warm.
   */
  async function promisesBeforeForward(authorization: string, warm: boolean): Promise<number | undefined> {
    if (warm) {
      send(authorization);
      // The first request's waits (store, bcrypt) settle.
      await new Promise((r) => setTimeout(r, 200));
    }
    promisesAtForward = undefined;
    promises = 0;
    hook.enable();
    try {
      send(authorization);
      for (let i = 0; i < 200 && promisesAtForward === undefined; i++) await new Promise((r) => setTimeout(r, 10));
    } finally {
      hook.disable();
    }
    return promisesAtForward;
  }

  it('Bearer (token verified before, session known live): no promise before the forward', async () => {
    expect(await promisesBeforeForward(`Bearer ${accessToken}`, true)).toBe(0);
  });

  it('Basic (password verified moments ago): no promise before the forward', async () => {
    expect(await promisesBeforeForward(basic('alice', 'alice-password'), true)).toBe(0);
  });

  it('an API key (the memory store knows its keys at once): no promise before the forward, with its own rate limit none either', async () => {
    const { key } = await gateway.apiKeys!.create({ name: 'svc' }, 'agk');
    expect(await promisesBeforeForward(`Bearer ${key}`, false)).toBe(0);
    expect(await promisesBeforeForward(`Bearer ${key}`, true)).toBe(0);
  });

  it('counts what a wait costs: a Basic password not verified before reaches the forward after promises (bcrypt, the lock check)', async () => {
    users.write({ alice: 'alice-password', bob: 'bob-password' });
    gateway.credentials.reload();
    expect(await promisesBeforeForward(basic('bob', 'bob-password'), false)).toBeGreaterThan(0);
  });
});
