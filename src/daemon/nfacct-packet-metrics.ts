// kube-proxy's iptables mode counts two kinds of packets in nfacct objects it creates at start,
// which `-m nfacct` rules add to, read at each scrape:
// - the packets accepted for localhost NodePorts (service-port-rules.ts): it shows whether anything
//   relies on 127.0.0.1 NodePorts before a move to nftables, which has none;
// - the INVALID packets KPROXY-FORWARD drops (top-level-chains.ts), which conntrack problems cause.
// Where the kernel has no nfacct, kube-proxy says so once and leaves the rule and the metric out.
import { Counter, type Registry } from 'prom-client';
import {
  CT_STATE_INVALID_COUNTER,
  LOCALHOST_NODEPORTS_COUNTER,
} from '../../dataplanes/iptables/chain-names.ts';
import type { NfacctCounters } from '../../dataplanes/iptables/nfacct.ts';
import { NFACCT_COUNTERS, type NfacctCounterName } from '../../dataplanes/iptables/nfacct-objects.ts';

/** One nfacct object and the metric that serves its packet count (kube-proxy's names and help). */
export interface NfacctPacketMetric {
  readonly counter: string;
  readonly metric: string;
  readonly help: string;
}

export const LOCALHOST_NODEPORT_PACKETS: NfacctPacketMetric = {
  counter: LOCALHOST_NODEPORTS_COUNTER,
  metric: 'kubeproxy_iptables_localhost_nodeports_accepted_packets_total',
  help: 'Number of packets accepted on nodeports of loopback interface',
};

export const INVALID_DROPPED_PACKETS: NfacctPacketMetric = {
  counter: CT_STATE_INVALID_COUNTER,
  metric: 'kubeproxy_iptables_ct_state_invalid_dropped_packets_total',
  help: 'packets dropped by iptables to work around conntrack problems',
};

/** The metric that serves each nfacct object's count. */
const PACKET_METRIC_OF: Readonly<Record<NfacctCounterName, NfacctPacketMetric>> = {
  [LOCALHOST_NODEPORTS_COUNTER]: LOCALHOST_NODEPORT_PACKETS,
  [CT_STATE_INVALID_COUNTER]: INVALID_DROPPED_PACKETS,
};

/** The packets counted so far. */
export type PacketCount = () => Promise<number>;

export type CounterOpening =
  | { readonly ok: true; readonly packets: PacketCount }
  | { readonly ok: false; readonly reason: string };

/** Creates the counter (an existing one keeps its count): how to read it, or why there is none. */
export async function openNfacctCounter(nfacct: NfacctCounters, counter: string): Promise<CounterOpening> {
  try {
    await nfacct.ensure(counter);
    return { ok: true, packets: () => nfacct.packets(counter) };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * kube-proxy's iptables mode creates its nfacct counters at start, whether or not a rule counts in
 * them yet, in the order render prints them (nfacct-objects.ts: one list); without nfacct in the
 * kernel it says why once per counter and goes on. The counters opened, by metric.
 */
export async function openIptablesCounters(
  nfacct: NfacctCounters,
  onMissing: (counted: NfacctPacketMetric, reason: string) => void,
): Promise<Map<NfacctPacketMetric, PacketCount>> {
  const opened = new Map<NfacctPacketMetric, PacketCount>();
  for (const name of NFACCT_COUNTERS) {
    const counted = PACKET_METRIC_OF[name];
    const counter = await openNfacctCounter(nfacct, counted.counter);
    if (counter.ok) opened.set(counted, counter.packets);
    else onMissing(counted, counter.reason);
  }
  return opened;
}

/** The metric, read from the kernel at each scrape; a failed read keeps the last count and is reported. */
export function registerNfacctPackets(
  registry: Registry,
  { metric, help }: NfacctPacketMetric,
  packets: PacketCount,
  onReadError: (error: unknown) => void,
): void {
  new Counter({
    name: metric,
    help,
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
