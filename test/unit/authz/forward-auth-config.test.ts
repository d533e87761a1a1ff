import { describe, expect, it } from 'vitest';
import { forwardAuthWarnings } from '../../../src/authz/forward-auth-config.js';
import { addressMatcher, parseAddressOrBlock } from '../../../src/core/addresses.js';
import { ConfigError } from '../../../src/config/config-error.js';
import { parseConfig } from '../../../src/config/load.js';

const ENV = { JWT_SECRET: 's'.repeat(40) };
const BASE = `
users: { htpasswd: users.htpasswd }
tokens:
  signing: { alg: HS256, secret: "\${JWT_SECRET}" }
routes:
  - { path: /wiki }
`;

function load(yaml: string) {
  try {
    return { config: parseConfig(yaml, '/etc/gw/gateway.yaml', ENV), problems: [] as string[] };
  } catch (err) {
    if (err instanceof ConfigError) return { config: undefined, problems: err.problems };
    throw err;
  }
}

describe('forwardAuth.trustedProxies', () => {
  it('matches addresses and CIDR blocks, IPv4 and IPv6, and IPv4 clients of a dual-stack listener', () => {
    const trusted = addressMatcher(['10.0.0.0/8', '192.168.1.7', 'fd00::/8', '::1', '2001:db8::/126']);
    for (const yes of ['10.0.0.1', '10.255.255.255', '::ffff:10.1.2.3', '192.168.1.7', '::FFFF:192.168.1.7', 'fd12:3456::1', '::1', '2001:db8::3']) {
      expect(trusted(yes), yes).toBe(true);
    }
    for (const no of ['11.0.0.1', '192.168.1.8', '127.0.0.1', '::ffff:127.0.0.1', 'fe80::1', '2001:db8::4', '', 'localhost', undefined]) {
      expect(trusted(no), String(no)).toBe(false);
    }
    expect(addressMatcher(['0.0.0.0/0'])('203.0.113.9')).toBe(true);
    expect(addressMatcher(['0.0.0.0/0'])('2001:db8::1')).toBe(false);
  });

  it('parses what the configuration may say, and nothing else', () => {
    expect(parseAddressOrBlock('10.0.0.0/8')).toEqual({ address: '10.0.0.0', prefix: 8, family: 'ipv4' });
    expect(parseAddressOrBlock('fd00::7')).toEqual({ address: 'fd00::7', prefix: 128, family: 'ipv6' });
    for (const bad of ['10.0.0.0/33', 'fd00::/129', '10.0.0/8', '10.0.0.0/', '10.0.0.0/-1', '10.0.0.0/8/8', 'proxy.internal', '*', '10.0.0.0/ 8', '']) {
      expect(parseAddressOrBlock(bad), bad).toBeUndefined();
    }
  });

  it('is read from the configuration, each bad entry named; an empty list is refused', () => {
    const ok = load(`${BASE}forwardAuth: { path: /auth/verify, trustedProxies: [10.0.0.0/8, "fd00::/8", 127.0.0.1] }\n`);
    expect(ok.problems).toEqual([]);
    expect(ok.config!.forwardAuth).toEqual({ path: '/auth/verify', trustedProxies: ['10.0.0.0/8', 'fd00::/8', '127.0.0.1'] });
    expect(load(`${BASE}forwardAuth: { path: /auth/verify }\n`).config!.forwardAuth!.trustedProxies).toBeUndefined();
    expect(load(`${BASE}forwardAuth: { path: /auth/verify, trustedProxies: [10.0.0.0/8, proxy.internal, 10.0.0.0/40] }\n`).problems).toEqual([
      'forwardAuth.trustedProxies[1] (line 7, column 65) must be an IPv4 or IPv6 address or CIDR block (10.0.0.0/8, fd00::/8), not "proxy.internal"',
      'forwardAuth.trustedProxies[2] (line 7, column 81) must be an IPv4 or IPv6 address or CIDR block (10.0.0.0/8, fd00::/8), not "10.0.0.0/40"',
    ]);
    expect(load(`${BASE}forwardAuth: { path: /auth/verify, trustedProxies: [] }\n`).problems).toEqual([
      'forwardAuth.trustedProxies (line 7, column 36) must name at least one address or CIDR block (leave it out to let any caller ask)',
    ]);
    expect(load(`${BASE}forwardAuth: { path: /auth/verify, trustedProxies: 10.0.0.0/8 }\n`).problems).toEqual(['forwardAuth.trustedProxies (line 7, column 36) must be a list; found "10.0.0.0/8"']);
  });

  it('config check warns when forward-auth answers any caller', () => {
    expect(forwardAuthWarnings({ forwardAuth: undefined })).toEqual([]);
    expect(forwardAuthWarnings({ forwardAuth: { path: '/auth/verify', trustedProxies: ['10.0.0.0/8'] } })).toEqual([]);
    const [warning, ...more] = forwardAuthWarnings({ forwardAuth: { path: '/auth/verify', trustedProxies: undefined } });
    expect(more).toEqual([]);
    expect(warning).toMatch(/\/auth\/verify answers any client .* forwardAuth\.trustedProxies/);
  });
});
