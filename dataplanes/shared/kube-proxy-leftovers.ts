// What an upstream kube-proxy leaves in the kernel, for `kproxy cleanup --kube-proxy` when a node
// switches over: its nftables tables (`ip kube-proxy`, `ip6 kube-proxy`) and its iptables chains,
// with the rules in built-in chains that jump to them. Only kube-proxy's own chains: the KUBE-*
// chains kubelet owns (KUBE-FIREWALL, KUBE-MARK-DROP, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT)
// stay, as kube-proxy's own cleanup leaves them.

import { type CommandRunner, IPTABLES_WAIT } from './command-runner.ts';
import { jumpsInto, removalInput, savedChainNames } from './iptables-save.ts';

const KUBE_PROXY_CHAINS = new Set([
  'KUBE-SERVICES',
  'KUBE-EXTERNAL-SERVICES',
  'KUBE-NODEPORTS',
  'KUBE-POSTROUTING',
  'KUBE-MARK-MASQ',
  'KUBE-FORWARD',
  'KUBE-PROXY-FIREWALL',
  'KUBE-PROXY-CANARY',
  // IPVS mode's iptables helpers.
  'KUBE-LOAD-BALANCER',
  'KUBE-NODE-PORT',
  'KUBE-LOOP-BACK',
  'KUBE-SOURCE-RANGES-FIREWALL',
  'KUBE-IPVS-FILTER',
  'KUBE-IPVS-OUT-FILTER',
]);
const KUBE_PROXY_CHAIN_PREFIXES = [
  'KUBE-SVC-',
  'KUBE-SVL-',
  'KUBE-EXT-',
  'KUBE-FW-',
  'KUBE-SEP-',
  'KUBE-XLB-',
];

export function isKubeProxyChain(chain: string): boolean {
  return KUBE_PROXY_CHAINS.has(chain) || KUBE_PROXY_CHAIN_PREFIXES.some((prefix) => chain.startsWith(prefix));
}

/**
 * The iptables-restore --noflush input that removes kube-proxy's chains from one table given its
 * iptables-save output: jump rules from other chains first, then the chains (flushed, deleted).
 * Empty when there is nothing of kube-proxy's.
 */
export function leftoverRestoreInput(table: string, saved: string): string {
  const chains = savedChainNames(saved).filter(isKubeProxyChain);
  const jumps = jumpsInto(saved, isKubeProxyChain);
  return chains.length === 0 && jumps.length === 0 ? '' : removalInput(table, chains, jumps);
}

const IPTABLES_TABLES = ['nat', 'filter', 'mangle'];
const IPTABLES_TOOLS = ['iptables-nft', 'ip6tables-nft', 'iptables-legacy', 'ip6tables-legacy'];

/** Removes kube-proxy's leftovers with both iptables backends and nft; returns what it removed. */
export async function removeKubeProxyLeftovers(runner: CommandRunner): Promise<string[]> {
  const removed: string[] = [];
  for (const family of ['ip', 'ip6']) {
    const listed = await runner.run('nft', ['list', 'table', family, 'kube-proxy']);
    if (listed.exitCode !== 0) continue;
    const deleted = await runner.run('nft', ['delete', 'table', family, 'kube-proxy']);
    if (deleted.exitCode !== 0)
      throw new Error(`nft delete table ${family} kube-proxy: ${deleted.stderr.trim()}`);
    removed.push(`nft table ${family} kube-proxy`);
  }
  for (const tool of IPTABLES_TOOLS) {
    for (const table of IPTABLES_TABLES) {
      const saved = await runner.run(`${tool}-save`, ['-t', table]);
      // A backend that is not installed or a table never used holds nothing of kube-proxy's.
      if (saved.exitCode !== 0) continue;
      const input = leftoverRestoreInput(table, saved.stdout);
      if (input === '') continue;
      const restored = await runner.run(`${tool}-restore`, ['--noflush', ...IPTABLES_WAIT], input);
      if (restored.exitCode !== 0) throw new Error(`${tool}-restore (${table}): ${restored.stderr.trim()}`);
      const count = input.split('\n').filter((line) => line.startsWith('-X ')).length;
      removed.push(`${tool} ${table}: ${count} kube-proxy chain(s)`);
    }
  }
  return removed;
}
