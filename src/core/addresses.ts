import { BlockList, isIP } from 'node:net';

/**
 * Addresses and CIDR blocks, IPv4 and IPv6 (`forwardAuth.trustedProxies`), matched against a TCP peer's
 * address; an IPv4 peer of a dual-stack listener (`::ffff:10.1.2.3`) counts as its IPv4 address.
 */

/** An address (`10.0.0.7`, `fd00::7`) or a block (`10.0.0.0/8`, `fd00::/8`); undefined when it is neither. */
export function parseAddressOrBlock(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const slash = text.indexOf('/');
  const address = unmapped(slash < 0 ? text : text.slice(0, slash));
  const version = isIP(address);
  if (version === 0) return undefined;
  const bits = version === 4 ? 32 : 128;
  let prefix = bits;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p) || Number(p) > bits) return undefined;
    prefix = Number(p);
  }
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** A test of a peer address against the list (entries already checked by the configuration). */
export function addressMatcher(entries: readonly string[]): (address: string | undefined) => boolean {
  const list = new BlockList();
  for (const entry of entries) {
    const parsed = parseAddressOrBlock(entry);
    if (!parsed) throw new Error(`not an address or CIDR block: ${entry}`);
    list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return (address) => {
    if (address === undefined) return false;
    const peer = unmapped(address);
    const version = isIP(peer);
    return version !== 0 && list.check(peer, version === 4 ? 'ipv4' : 'ipv6');
  };
}

/** `::ffff:10.1.2.3` (an IPv4 client of a dual-stack listener) is `10.1.2.3`. */
function unmapped(address: string): string {
  const m = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return m ? m[1]! : address;
}
