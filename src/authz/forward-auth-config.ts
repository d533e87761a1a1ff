import type { Config } from '../config/types.js';

/** What `config check` warns about the forward-auth settings (not errors: the gateway starts). */
export function forwardAuthWarnings(config: Pick<Config, 'forwardAuth'>): string[] {
  const f = config.forwardAuth;
  if (!f || f.trustedProxies !== undefined) return [];
  return [
    `forwardAuth: ${f.path} answers any client that reaches this port, not only your proxy; set forwardAuth.trustedProxies to the addresses (or CIDR blocks) of the proxies that ask`,
  ];
}
