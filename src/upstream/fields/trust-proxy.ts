import { BlockList, isIPv4 } from 'node:net';

/** The peer address as people write it: an IPv4 peer of a dual-stack socket shows as ::ffff:a.b.c.d. */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/** Peers (addresses or CIDRs from `trustProxy`) whose X-Forwarded-* headers are believed. */
export class TrustedPeers {
  private readonly list = new BlockList();
  private readonly empty: boolean;

  constructor(entries: readonly string[]) {
    this.empty = entries.length === 0;
    for (const entry of entries) {
      const [address = '', prefix] = entry.split('/');
      const family = isIPv4(address) ? 'ipv4' : 'ipv6';
      if (prefix === undefined) this.list.addAddress(address, family);
      else this.list.addSubnet(address, Number(prefix), family);
    }
  }

  trusts(address: string | undefined): boolean {
    if (this.empty || !address) return false;
    const plain = plainAddress(address);
    return this.list.check(plain, isIPv4(plain) ? 'ipv4' : 'ipv6');
  }
}
