import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';

/**
 * The CAs an `https:` target's certificate may chain to: undefined (Node's own, `NODE_EXTRA_CA_CERTS`
 * included) unless the upstream names a `caFile`; then Node's bundle, `NODE_EXTRA_CA_CERTS` and the
 * file, since Node's `ca` option replaces its defaults instead of adding to them. Read once per pool.
 */
export function upstreamCa(caFile: string | undefined): string[] | undefined {
  if (caFile === undefined) return undefined;
  const cas = [...rootCertificates];
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  if (extra) {
    try {
      cas.push(readFileSync(extra, 'utf8'));
    } catch {
      // Node warned about it at start and went on without it; so does the gateway.
    }
  }
  cas.push(readFileSync(caFile, 'utf8'));
  return cas;
}
