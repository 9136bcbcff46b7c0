// Which IPVS virtual servers are kproxy's. IPVS has no owner field, so ownership is by address,
// one rule for the full sync, adoption at start and cleanup: the dummy link's addresses and the
// node-port addresses (kube-proxy removes every virtual server it does not want; kproxy only
// those there), never one in ipvs.excludeCIDRs. A process without a record (a restart, `kproxy
// cleanup`) learns the node-port addresses from the companion table's `nodeport-ips` set, which
// every sync keeps: the node's own addresses may have changed since, and the link holds only
// service addresses.
import { cidrContains } from '../shared/cidr.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import { COMPANION_SET, COMPANION_TABLE } from './companion-ruleset.ts';
import { type VirtualService, virtualServerKey } from './virtual-servers.ts';

export interface Ownership {
  /** Addresses whose virtual servers are ours. */
  readonly addresses: ReadonlySet<string>;
  /** Virtual servers this process made or adopted, by virtualServerKey. */
  readonly keys: ReadonlySet<string>;
  readonly excludeCIDRs: readonly string[];
}

export function ownedVirtualServer(service: VirtualService, ownership: Ownership): boolean {
  const ours = ownership.addresses.has(service.address) || ownership.keys.has(virtualServerKey(service));
  return ours && !ownership.excludeCIDRs.some((cidr) => cidrContains(cidr, service.address));
}

interface NftSetListing {
  readonly nftables?: readonly { readonly set?: { readonly elem?: readonly unknown[] } }[];
}

/** What the companion tables left in the kernel record. */
export interface CompanionRecord {
  /** How many families may have one: its `nodeport-ips` set listed, or not listed but not missing. */
  readonly families: number;
  /** The node-port addresses they record (none when they are gone). */
  readonly nodePortAddresses: string[];
}

export async function readCompanionRecord(runner: CommandRunner): Promise<CompanionRecord> {
  const addresses: string[] = [];
  let families = 0;
  for (const family of ['ip', 'ip6']) {
    const listed = await runner.run('nft', [
      '-j',
      'list',
      'set',
      family,
      COMPANION_TABLE,
      COMPANION_SET.nodePortIps,
    ]);
    // Any other failure (a table this nft cannot read) may still be a table of ours.
    if (listed.exitCode !== 0) {
      if (!/No such file or directory/.test(listed.stderr)) families++;
      continue;
    }
    families++;
    const json = JSON.parse(listed.stdout) as NftSetListing;
    for (const item of json.nftables ?? []) {
      for (const elem of item.set?.elem ?? []) if (typeof elem === 'string') addresses.push(elem);
    }
  }
  return { families, nodePortAddresses: addresses };
}

/** The node-port addresses the companion tables record (none when they are gone). */
export async function recordedNodePortAddresses(runner: CommandRunner): Promise<string[]> {
  return (await readCompanionRecord(runner)).nodePortAddresses;
}
