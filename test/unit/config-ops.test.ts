import { describe, expect, it } from 'vitest';
import { inspectConfigText, parseConfig } from '../../src/config/load.js';
import { nearest } from '../../src/config/suggest.js';

const SECRET = 's'.repeat(40);
const BASE = `
users: { htpasswd: users.htpasswd }
tokens:
  signing: { alg: HS256, secret: "${SECRET}" }
`;
const problems = (yaml: string) => inspectConfigText(yaml, '/etc/gw/gateway.yaml', {}).problems;

describe('admin and server.tls settings', () => {
  it('defaults the admin listener to 127.0.0.1:9091, reads host and port, and turns it off with false', () => {
    expect(parseConfig(BASE, '/etc/gw/gateway.yaml', {}).admin).toEqual({ host: '127.0.0.1', port: 9091 });
    expect(parseConfig(BASE + 'admin: { host: 0.0.0.0, port: "9100" }\n', '/etc/gw/gateway.yaml', {}).admin).toEqual({ host: '0.0.0.0', port: 9100 });
    expect(parseConfig(BASE + 'admin: false\n', '/etc/gw/gateway.yaml', {}).admin).toBe(false);
    expect(problems(BASE + 'admin: { port: 70000, path: /m }\n')).toEqual([
      'admin.path (line 5, column 23) is not a known setting',
      'admin.port (line 5, column 10) must be a non-negative integer no greater than 65535; found 70000',
    ]);
  });

  it('reads server.tls with paths relative to the file, and requires both files', () => {
    const c = parseConfig(BASE + 'server: { tls: { certFile: tls/cert.pem, keyFile: /k.pem } }\n', '/etc/gw/gateway.yaml', {});
    expect(c.server.tls).toEqual({ certFile: '/etc/gw/tls/cert.pem', keyFile: '/k.pem', reloadIntervalMs: 5000, http2: true, clientCerts: 'request', userFrom: 'cn' });
    expect(parseConfig(BASE, '/etc/gw/gateway.yaml', {}).server.tls).toBeUndefined();
    expect(problems(BASE + 'server: { tls: { certFile: c.pem } }\n')).toEqual(['server.tls.keyFile is required']);
  });

  it('reads the client certificate settings of server.tls, paths relative to the file', () => {
    const c = parseConfig(BASE + 'server: { tls: { certFile: c.pem, keyFile: k.pem, clientCa: tls/clients.pem, clientCerts: require, crlFile: tls/clients.crl, userFrom: san-uri } }\n', '/etc/gw/gateway.yaml', {});
    expect(c.server.tls).toMatchObject({ clientCa: '/etc/gw/tls/clients.pem', clientCerts: 'require', crlFile: '/etc/gw/tls/clients.crl', userFrom: 'san-uri' });
    expect(problems(BASE + 'server: { tls: { certFile: c.pem, keyFile: k.pem, crlFile: x.crl } }\n'))
      .toEqual(['server.tls.crlFile (line 5, column 51) needs server.tls.clientCa (a CRL of client certificates)']);
    expect(problems(BASE + 'server: { tls: { certFile: c.pem, keyFile: k.pem, clientCa: ca.pem, clientCerts: optional, userFrom: upn } }\n')).toHaveLength(2);
  });
});

describe('config problems an operator can act on', () => {
  it('suggests the nearest known key for a misspelled one', () => {
    expect(problems(BASE + 'servr: { port: 1 }\nlog: { levle: debug }\nlockout: { maxFailuresPerUsr: 3 }\n')).toEqual([
      'servr (line 5, column 1) is not a known setting; did you mean server?',
      'lockout.maxFailuresPerUsr (line 7, column 12) is not a known setting; did you mean maxFailuresPerUser?',
      'log.levle (line 6, column 8) is not a known setting; did you mean level?',
    ]);
    expect(nearest('colour', ['server', 'routes', 'log'])).toBeUndefined();
    expect(nearest('timeoutMS', ['url', 'timeoutMs'])).toBe('timeoutMs');
  });

  it('names the line and column of a YAML syntax error', () => {
    expect(problems('server:\n  port: 8080\n  host: [127.0.0.1\nstore: {}\n')).toEqual([
      expect.stringMatching(/^\/etc\/gw\/gateway\.yaml is not valid YAML: line \d+, column \d+: /),
    ]);
    const [p] = problems('server:\n  port: 1\n port: 2\n');
    expect(p).toMatch(/^\/etc\/gw\/gateway\.yaml is not valid YAML: line 3, column 1: All mapping items must start at the same column$/);
  });
});
