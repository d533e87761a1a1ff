import { describe, expect, expectTypeOf, it } from 'vitest';
import { Checker } from '../../src/config/checker.js';
import { SETTINGS, type Setting } from '../../src/config/defaults.js';
import { readScalars, type Scalars } from '../../src/config/sections.js';
import type { LockoutConfig, LogConfig, TlsConfig, UpstreamConfig } from '../../src/config/types.js';

const entries = Object.entries(SETTINGS) as Array<[string, Setting]>;
const scalarKinds = new Set(['integer', 'boolean', 'string', 'path', 'secret', 'header name']);
const isScalar = (s: Setting) => s.values !== undefined || scalarKinds.has(s.type);
/** Every prefix that has a scalar child: the sections readScalars can read. */
const prefixes = [...new Set(entries.filter(([k, s]) => k.includes('.') && isScalar(s)).map(([k]) => k.slice(0, k.lastIndexOf('.'))))];

describe('settings declared once: types and reading follow from the table', () => {
  it('reads every scalar setting with a default as that default when the file leaves it out', () => {
    for (const prefix of prefixes) {
      const c = new Checker();
      const read = readScalars(c, prefix, {}) as Record<string, unknown>;
      for (const [key, s] of entries) {
        const name = key.slice(prefix.length + 1);
        if (!key.startsWith(`${prefix}.`) || /[.[]/.test(name) || !isScalar(s)) continue;
        if (s.default !== undefined) expect(read[name], key).toEqual(s.default);
        else if (s.required) expect(c.problems, key).toContain(`${prefix}.${name} is required`);
        else expect(name in read, key).toBe(false);
      }
    }
  });

  it('holds each value to its bounds and allowed values, naming the key as the file wrote it', () => {
    const c = new Checker();
    const read = readScalars(c, 'upstreams.<name>', { maxQueued: -1, balance: 'random', preserveHost: 'yes', cooldownMs: '250' }, { as: 'upstreams.api' });
    expect(c.problems).toEqual([
      'upstreams.api.balance must be one of round-robin, least-requests; found "random"',
      'upstreams.api.preserveHost must be true or false; found "yes"',
      'upstreams.api.maxQueued must be a non-negative integer; found -1',
    ]);
    // A bad value reads as the default, so one mistake is reported once, not again downstream.
    expect(read).toMatchObject({ balance: 'round-robin', preserveHost: false, maxQueued: 1024, cooldownMs: 250 });
    const bounded = new Checker();
    readScalars(bounded, 'lockout', { addressFailuresPerMinute: 6001 });
    expect(bounded.problems).toEqual(['lockout.addressFailuresPerMinute must be a positive integer no greater than 6000; found 6001']);
  });

  it('resolves paths against the configuration file and leaves out what the caller reads by hand', () => {
    const c = new Checker();
    const tls = readScalars(c, 'server.tls', { certFile: 'tls/cert.pem', keyFile: '/etc/key.pem' }, { at: (p) => (p.startsWith('/') ? p : `/srv/gw/${p}`) });
    expect(tls).toEqual({ certFile: '/srv/gw/tls/cert.pem', keyFile: '/etc/key.pem', reloadIntervalMs: 5000, http2: true, clientCerts: 'request', userFrom: 'cn' });
    const store = readScalars(c, 'store', { waitForReplicas: 'x' }, { except: ['kind', 'waitForReplicas'] });
    expect('waitForReplicas' in store || 'kind' in store).toBe(false);
    expect(c.problems).toEqual([]);
  });

  it('types each section from the table: defaults make a key always present, enumerations their values', () => {
    expectTypeOf<LockoutConfig>().toEqualTypeOf<Scalars<'lockout'>>();
    expectTypeOf<LockoutConfig['windowSeconds']>().toEqualTypeOf<number>();
    expectTypeOf<LogConfig['level']>().toEqualTypeOf<'debug' | 'info' | 'warn' | 'error' | 'silent'>();
    expectTypeOf<TlsConfig['certFile']>().toEqualTypeOf<string>();
    expectTypeOf<UpstreamConfig['balance']>().toEqualTypeOf<'round-robin' | 'least-requests'>();
    // No default and not required: optional.
    expectTypeOf<Scalars<'routes[]'>['audience']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<Scalars<'store.sentinel'>>().toHaveProperty('password').toEqualTypeOf<string | undefined>();
  });
});
