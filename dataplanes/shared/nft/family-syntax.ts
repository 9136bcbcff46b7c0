// The words that differ between the ip and ip6 tables.
import type { IPFamily } from '../../../contract/base/ip-family.ts';
import type { NftFamily } from './transaction.ts';

export interface FamilySyntax {
  readonly family: NftFamily;
  /** Payload keyword: `ip daddr`, `dnat ip to`. */
  readonly ip: 'ip' | 'ip6';
  readonly addrType: 'ipv4_addr' | 'ipv6_addr';
  /** Loopback destinations, which never serve node ports (as in kube-proxy's nftables mode). */
  readonly loopback: string;
  /** "1.2.3.4:80" or "[fd00::1]:80" for a dnat target. */
  hostPort(ip: string, port: number): string;
}

const IPV4: FamilySyntax = {
  family: 'ip',
  ip: 'ip',
  addrType: 'ipv4_addr',
  loopback: '127.0.0.0/8',
  hostPort: (ip, port) => `${ip}:${port}`,
};

const IPV6: FamilySyntax = {
  family: 'ip6',
  ip: 'ip6',
  addrType: 'ipv6_addr',
  loopback: '::1',
  hostPort: (ip, port) => `[${ip}]:${port}`,
};

export function familySyntax(family: IPFamily): FamilySyntax {
  return family === 'IPv4' ? IPV4 : IPV6;
}
