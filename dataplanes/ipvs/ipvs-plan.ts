// What the IPVS dataplane wants in the kernel (desired) and the operations that get it there (plan).
// A full plan carries the whole desired state: the live dataplane reconciles it against a dump of
// the kernel. An incremental plan carries operations against what planFull(prev) put there.
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { HooksLast } from '../shared/nft/hooks-last.ts';
import type { NftTransaction } from '../shared/nft/transaction.ts';
import type { RealServer, VirtualServer, VirtualService } from './virtual-servers.ts';

export const DUMMY_LINK = 'kproxy-ipvs0';

export const FAMILIES: readonly IPFamily[] = ['IPv4', 'IPv6'];

export interface IpvsDesired {
  /** Every virtual server of both families, by virtualServerKey, in key order (IPv4 first). */
  readonly virtualServers: ReadonlyMap<string, VirtualServer>;
  /** Addresses bound to the dummy link, both families, sorted. */
  readonly boundAddresses: readonly string[];
  /** Node addresses that serve node ports, both families. */
  readonly nodePortAddresses: readonly string[];
}

export type IpvsOp =
  | { readonly op: 'add-service' | 'edit-service' | 'delete-service'; readonly service: VirtualService }
  | {
      readonly op: 'add-server' | 'edit-server' | 'delete-server';
      readonly service: VirtualService;
      readonly server: RealServer;
    }
  | {
      /** Graceful deletion: weight 0 so no new connection goes there; removed once drained. */
      readonly op: 'drain-server';
      readonly service: VirtualService;
      readonly server: RealServer;
    };

export interface AddressChanges {
  readonly add: readonly string[];
  readonly delete: readonly string[];
}

export type IpvsPlan =
  | {
      readonly kind: 'full';
      readonly desired: IpvsDesired;
      /** The companion tables in one transaction: what replaces them on a node that holds them. */
      readonly nft: NftTransaction;
      /** The same in the three steps of a node without them (hooks-last.ts); `nft` is their join. */
      readonly coldStart: HooksLast;
    }
  | {
      readonly kind: 'incremental';
      readonly ops: readonly IpvsOp[];
      readonly addresses: AddressChanges;
      readonly nft: NftTransaction;
    };
