// Stale UDP conntrack entries, as kube-proxy's conntrack.CleanStaleEntries removes them. UDP has
// no connection to break, so a flow keeps its old translation until the entry times out:
// - a service port that had no endpoints and now has some: entries created while traffic was
//   rejected/dropped would keep blackholing, so every flow to its addresses goes;
// - an endpoint that went away: flows DNATed to it go (matched on the reply source).

import type { IPFamily } from '../../src/base/ip-family.ts';
import type { DualStackState, ProxyState, ServicePort } from '../../src/model/proxy-state.ts';
import type { CommandRunner } from './command-runner.ts';

/** Argument lists for `conntrack -D`, one deletion each. */
export function staleUdpFlowDeletions(prev: ProxyState | undefined, next: ProxyState): string[][] {
  const family = familyArgs(next.family);
  const deletions: string[][] = [];
  for (const sp of next.servicePorts.values()) {
    if (sp.protocol !== 'UDP') continue;
    const before = prev?.servicePorts.get(sp.key);
    if (sp.hasEndpoints && !before?.hasEndpoints) {
      for (const ip of serviceIPs(sp))
        deletions.push([...family, '-p', 'udp', '--orig-dst', ip, '--dport', `${sp.port}`]);
      if (sp.nodePort !== 0) deletions.push([...family, '-p', 'udp', '--dport', `${sp.nodePort}`]);
    }
  }
  for (const before of prev?.servicePorts.values() ?? []) {
    if (before.protocol !== 'UDP') continue;
    const after = next.servicePorts.get(before.key);
    const kept = new Set(after ? endpointIPs(after) : []);
    for (const gone of endpointIPs(before).filter((ip) => !kept.has(ip))) {
      for (const ip of serviceIPs(before)) {
        deletions.push([
          ...family,
          '-p',
          'udp',
          '--orig-dst',
          ip,
          '--dport',
          `${before.port}`,
          '--reply-src',
          gone,
        ]);
      }
      if (before.nodePort !== 0) {
        deletions.push([...family, '-p', 'udp', '--dport', `${before.nodePort}`, '--reply-src', gone]);
      }
    }
  }
  return deletions;
}

/** Runs the deletions; returns how many entries the kernel removed. */
export async function deleteStaleUdpFlows(
  runner: CommandRunner,
  deletions: readonly string[][],
): Promise<number> {
  let deleted = 0;
  for (const args of deletions) {
    // conntrack exits 1 when nothing matched; the summary line says how many went either way.
    const result = await runner.run('conntrack', ['-D', ...args]);
    deleted += Number(/(\d+) flow entries have been deleted/.exec(result.stderr)?.[1] ?? 0);
  }
  return deleted;
}

/**
 * The stale flows of a whole sync from `prev` to `next`, per family. Without `prev` (the first sync
 * after start) every UDP service port with endpoints counts as newly active, as in kube-proxy,
 * whose endpoints map starts empty: flows blackholed while no proxy ran are cleared.
 */
export async function cleanStaleUdpFlows(
  runner: CommandRunner,
  prev: DualStackState | undefined,
  next: DualStackState,
): Promise<number> {
  let deleted = 0;
  for (const family of ['IPv4', 'IPv6'] as const) {
    const after = next[family];
    if (after !== undefined)
      deleted += await deleteStaleUdpFlows(runner, staleUdpFlowDeletions(prev?.[family], after));
  }
  return deleted;
}

function familyArgs(family: IPFamily): string[] {
  return family === 'IPv6' ? ['-f', 'ipv6'] : [];
}

function serviceIPs(sp: ServicePort): string[] {
  // No cluster IP ('') when an older Service holds it.
  return [sp.clusterIP, ...sp.externalIPs, ...sp.loadBalancerIPs].filter(Boolean);
}

function endpointIPs(sp: ServicePort): string[] {
  return [...new Set([...sp.clusterEndpoints, ...sp.localEndpoints].map((e) => e.ip))];
}
