import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { rootCertificates } from 'node:tls';
import { expect, it } from 'vitest';
import { upstreamCa } from '../../src/proxy/trust.js';
import { gatewayFixture } from '../support/fixtures.js';
import { TestPki } from '../support/tls-pki.js';

const BASIC = 'Basic ' + Buffer.from('alice:alice-pw').toString('base64');
let pki: TestPki;
let https: Server;
let url: string;

const gw = gatewayFixture({
  before: async () => {
    pki = new TestPki();
    https = createServer({ cert: readFileSync(pki.certFile), key: readFileSync(pki.keyFile) }, (_req, res) => res.end('over TLS'));
    await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(https.address() as { port: number }).port}`;
  },
  config: () => ({
    upstreams: { trusted: { url, caFile: pki.caFile }, untrusted: { url } },
    routes: [{ path: '/trusted', upstream: 'trusted' }, { path: '/untrusted', upstream: 'untrusted' }],
  }),
  after: async () => {
    await new Promise<void>((resolve) => https.close(() => resolve()));
    pki.remove();
  },
});

it('an https HTTP/1.1 upstream trusts its caFile beside Node\'s CAs; without it, its test CA is not trusted (502)', async () => {
  const trusted = await fetch(`${gw.base}/trusted/x`, { headers: { authorization: BASIC } });
  expect(trusted.status).toBe(200);
  expect(await trusted.text()).toBe('over TLS');
  const untrusted = await fetch(`${gw.base}/untrusted/x`, { headers: { authorization: BASIC } });
  expect(untrusted.status).toBe(502);
  expect((await untrusted.json() as { code: string }).code).toBe('bad_gateway');
});

it('caFile adds to Node\'s CAs and NODE_EXTRA_CA_CERTS instead of replacing them', () => {
  const before = process.env.NODE_EXTRA_CA_CERTS;
  process.env.NODE_EXTRA_CA_CERTS = pki.certFile;
  try {
    const cas = upstreamCa(pki.caFile)!;
    expect(cas.slice(0, rootCertificates.length)).toEqual([...rootCertificates]);
    expect(cas.slice(rootCertificates.length)).toEqual([readFileSync(pki.certFile, 'utf8'), readFileSync(pki.caFile, 'utf8')]);
    expect(upstreamCa(undefined)).toBeUndefined();
  } finally {
    if (before === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
    else process.env.NODE_EXTRA_CA_CERTS = before;
  }
});
