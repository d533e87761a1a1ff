import { AsyncLocalStorage, AsyncResource, executionAsyncId, triggerAsyncId } from 'node:async_hooks';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { connect, createServer, type ClientHttp2Session, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installAsyncResourceBind } from '../../src/core/async-bind.js';

const nodeMajor = Number(process.versions.node.split('.')[0]);

describe('AsyncResource.prototype.bind without its slow part (Node 20–24)', () => {
  beforeAll(() => {
    installAsyncResourceBind();
  });

  it('replaces Node\'s own only while it builds deprecate wrappers, and once', () => {
    const source = Function.prototype.toString.call(AsyncResource.prototype.bind);
    expect(source).not.toContain('deprecate(');
    expect(installAsyncResourceBind()).toBe(false);
  });

  it.runIf(nodeMajor < 24)('finds the slow one in a fresh process of Node 20, and DEP0172 is emitted once, as by Node', () => {
    const script = `
      import { AsyncResource } from 'node:async_hooks';
      const { installAsyncResourceBind } = await import(process.argv[1]);
      const warnings = [];
      process.on('warning', (w) => warnings.push(w.code));
      const first = installAsyncResourceBind();
      const r = new AsyncResource('test');
      const b = r.bind(() => 1);
      const same = b.asyncResource === r && b.asyncResource === r;
      const other = new AsyncResource('other');
      b.asyncResource = other;
      setImmediate(() => console.log(JSON.stringify({ first, same, replaced: b.asyncResource === other, warnings })));
    `;
    const module = pathToFileURL(join(import.meta.dirname, '../../dist/src/core/async-bind.js')).href;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script, module], { encoding: 'utf8' });
    // Printed once, as Node prints a deprecation.
    expect(run.stderr.match(/\[DEP0172\] DeprecationWarning: The asyncResource property on bound functions is deprecated/g)).toHaveLength(1);
    const out = JSON.parse(run.stdout.trim().split('\n').pop()!) as { first: boolean; same: boolean; replaced: boolean; warnings: string[] };
    expect(out).toEqual({ first: true, same: true, replaced: true, warnings: ['DEP0172'] });
  });

  it('runs the function in the resource\'s scope with the caller\'s this and arguments, and keeps its length', () => {
    const resource = new AsyncResource('test');
    const bound = resource.bind(function (this: unknown, a: number, b: number) {
      return { scope: executionAsyncId(), trigger: triggerAsyncId(), self: this, sum: a + b };
    });
    const receiver = { name: 'caller' };
    expect(bound.call(receiver, 2, 3)).toEqual({ scope: resource.asyncId(), trigger: resource.triggerAsyncId(), self: receiver, sum: 5 });
    expect(bound.length).toBe(2);
    expect(Object.getOwnPropertyDescriptor(bound, 'length')).toMatchObject({ configurable: true, enumerable: false, writable: false });
    expect(Object.keys(bound)).toEqual(['asyncResource']);
  });

  it('binds thisArg when given, and the static bind carries its new resource', () => {
    const resource = new AsyncResource('test');
    const self = { name: 'bound' };
    // Node's types leave out the documented thisArg.
    const bindWith = resource.bind.bind(resource) as unknown as (fn: (this: unknown) => unknown, thisArg: unknown) => (this: unknown) => unknown;
    const bound = bindWith(function (this: unknown) {
      return [this, executionAsyncId()];
    }, self);
    expect(bound.call({ name: 'caller' })).toEqual([self, resource.asyncId()]);
    const fromStatic = AsyncResource.bind(function named() {
      return executionAsyncId();
    });
    expect(fromStatic()).toBe((fromStatic as unknown as { asyncResource: AsyncResource }).asyncResource.asyncId());
  });

  it('refuses what is not a function as Node does', () => {
    const resource = new AsyncResource('test');
    expect(() => resource.bind(42 as unknown as () => void)).toThrow(expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' }));
  });

  it('carries AsyncLocalStorage from where it was bound', async () => {
    const storage = new AsyncLocalStorage<string>();
    const bound = storage.run('at bind', () => new AsyncResource('test').bind(() => storage.getStore()));
    const later = await storage.run('elsewhere', () => new Promise<string | undefined>((resolve) => setImmediate(() => resolve(bound()))));
    expect(later).toBe('at bind');
  });

  describe('under Node\'s HTTP/2 client, which binds every request', () => {
    let server: Http2Server;
    let session: ClientHttp2Session;
    beforeAll(async () => {
      server = createServer();
      server.on('stream', (stream) => stream.respond({ ':status': 204 }, { endStream: true }));
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    });
    afterAll(async () => {
      session.close();
      await new Promise((resolve) => server.close(resolve));
    });

    it('requests made before and after the session connects are answered, each in its own context', async () => {
      const storage = new AsyncLocalStorage<number>();
      const ask = (n: number) => storage.run(n, () => new Promise<[number, number | undefined]>((resolve, reject) => {
        const stream = session.request({ ':path': '/' });
        stream.on('response', (headers) => resolve([Number(headers[':status']), storage.getStore()]));
        stream.on('error', reject);
      }));
      // The first ones wait for the connection (Node binds their start and runs it on 'connect').
      const answers = await Promise.all([ask(1), ask(2)]);
      answers.push(await ask(3));
      expect(answers).toEqual([[204, 1], [204, 2], [204, 3]]);
    });
  });
});
