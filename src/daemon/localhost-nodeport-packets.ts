// kube-proxy's count of the packets its iptables mode accepts for localhost NodePorts: an nfacct
// counter created at start, which a rule before each node port's adds to (service-port-rules.ts),
// read at each scrape as kubeproxy_iptables_localhost_nodeports_accepted_packets_total. It shows
// whether anything relies on 127.0.0.1 NodePorts before a move to nftables, which has none. Where
// the kernel has no nfacct, kube-proxy says so once and leaves the rule and the metric out.
import { Counter, type Registry } from 'prom-client';
import { LOCALHOST_NODEPORTS_COUNTER } from '../../dataplanes/iptables/chain-names.ts';
import type { NfacctCounters } from '../../dataplanes/iptables/nfacct.ts';

/** The packets counted so far. */
export type PacketCount = () => Promise<number>;

export type CounterOpening =
  | { readonly ok: true; readonly packets: PacketCount }
  | { readonly ok: false; readonly reason: string };

/** Creates the counter (an existing one keeps its count): how to read it, or why there is none. */
export async function openLocalhostNodePortCounter(nfacct: NfacctCounters): Promise<CounterOpening> {
  try {
    await nfacct.ensure(LOCALHOST_NODEPORTS_COUNTER);
    return { ok: true, packets: () => nfacct.packets(LOCALHOST_NODEPORTS_COUNTER) };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

export const LOCALHOST_NODEPORT_PACKETS_METRIC =
  'kubeproxy_iptables_localhost_nodeports_accepted_packets_total';

/** The metric, read from the kernel at each scrape; a failed read keeps the last count and is reported. */
export function registerLocalhostNodePortPackets(
  registry: Registry,
  packets: PacketCount,
  onReadError: (error: unknown) => void,
): void {
  new Counter({
    name: LOCALHOST_NODEPORT_PACKETS_METRIC,
    help: 'Number of packets accepted on nodeports of loopback interface',
    registers: [registry],
    async collect() {
      try {
        const count = await packets();
        this.reset();
        this.inc(count);
      } catch (error) {
        onReadError(error);
      }
    },
  });
}
