// kproxy run's start-up step in iptables mode, done in a lab namespace: kube-proxy's nfacct
// counters opened (created unless they exist) through the daemon's own code, over netlink in that
// namespace. Rendered iptables rules count in them, and iptables-restore refuses an nfacct match
// whose object does not exist.
import { fileURLToPath } from 'node:url';
import type { Lab } from './netns.ts';

/** The daemon's names for its nfacct packet metrics (src/daemon/nfacct-packet-metrics.ts). */
export type NfacctPacketMetricName = 'LOCALHOST_NODEPORT_PACKETS' | 'INVALID_DROPPED_PACKETS';

export const ALL_NFACCT_COUNTERS: readonly NfacctPacketMetricName[] = [
  'LOCALHOST_NODEPORT_PACKETS',
  'INVALID_DROPPED_PACKETS',
];

const module = (path: string) => JSON.stringify(fileURLToPath(new URL(`../${path}`, import.meta.url)));

/** Opens the counters in `ns`; each one's outcome as `openNfacctCounter` gives it ({ ok: true } or why not). */
export async function openNfacctCountersIn(
  lab: Lab,
  ns: string,
  counters: readonly NfacctPacketMetricName[] = ALL_NFACCT_COUNTERS,
): Promise<unknown[]> {
  const script = `
    import { netlinkNfacct } from ${module('dataplanes/iptables/nfacct.ts')};
    import * as metrics from ${module('src/daemon/nfacct-packet-metrics.ts')};
    const names = ${JSON.stringify(counters)};
    const opened = [];
    for (const name of names) opened.push(await metrics.openNfacctCounter(netlinkNfacct, metrics[name].counter));
    console.log(JSON.stringify(opened));
  `;
  const { stdout } = await lab.exec(ns, process.execPath, ['--input-type=module', '-e', script]);
  return JSON.parse(stdout) as unknown[];
}

/** `kproxy run`'s own start-up step (openIptablesCounters) done in `ns`: the counters it opened, in order. */
export async function openRunCountersIn(lab: Lab, ns: string): Promise<string[]> {
  const script = `
    import { netlinkNfacct } from ${module('dataplanes/iptables/nfacct.ts')};
    import { openIptablesCounters } from ${module('src/daemon/nfacct-packet-metrics.ts')};
    const opened = await openIptablesCounters(netlinkNfacct, (counted, reason) => {
      throw new Error(\`\${counted.counter}: \${reason}\`);
    });
    console.log(JSON.stringify([...opened.keys()].map((counted) => counted.counter)));
  `;
  const { stdout } = await lab.exec(ns, process.execPath, ['--input-type=module', '-e', script]);
  return JSON.parse(stdout) as string[];
}

/** A scrape of one of the daemon's nfacct packet metrics in `ns`, read from the kernel like `kproxy run`'s. */
export async function scrapedNfacctMetric(
  lab: Lab,
  ns: string,
  name: NfacctPacketMetricName,
): Promise<string> {
  const script = `
    import { Registry } from ${JSON.stringify(import.meta.resolve('prom-client'))};
    import { netlinkNfacct } from ${module('dataplanes/iptables/nfacct.ts')};
    import { ${name}, openNfacctCounter, registerNfacctPackets } from ${module('src/daemon/nfacct-packet-metrics.ts')};
    const registry = new Registry();
    const counter = await openNfacctCounter(netlinkNfacct, ${name}.counter);
    registerNfacctPackets(registry, ${name}, counter.packets, (error) => { throw error; });
    console.log(await registry.getSingleMetricAsString(${name}.metric));
  `;
  return (await lab.exec(ns, process.execPath, ['--input-type=module', '-e', script])).stdout;
}
