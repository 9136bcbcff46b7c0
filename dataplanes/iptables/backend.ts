// iptables-nft or iptables-legacy: both can hold rules on one machine and must never be mixed.
// Chosen like kube-proxy's iptables wrapper: the backend that already holds kube-proxy/kproxy
// rules, else the one with more rules, else nft.
import type { IPFamily } from '../../contract/base/ip-family.ts';
import type { CommandRunner } from '../shared/command-runner.ts';

export type IptablesBackend = 'nft' | 'legacy';

export interface IptablesTools {
  /** iptables-nft, ip6tables-legacy, ... */
  readonly iptables: string;
  readonly restore: string;
  readonly save: string;
}

export function iptablesTools(backend: IptablesBackend, family: IPFamily): IptablesTools {
  const base = family === 'IPv4' ? 'iptables' : 'ip6tables';
  return {
    iptables: `${base}-${backend}`,
    restore: `${base}-${backend}-restore`,
    save: `${base}-${backend}-save`,
  };
}

export interface BackendChoice {
  readonly backend: IptablesBackend;
  /** Why, for the log. */
  readonly reason: string;
}

interface RuleCensus {
  /** Lines naming a KPROXY-* or KUBE-* chain. */
  readonly proxyLines: number;
  readonly rules: number;
}

async function census(runner: CommandRunner, backend: IptablesBackend): Promise<RuleCensus> {
  let proxyLines = 0;
  let rules = 0;
  for (const family of ['IPv4', 'IPv6'] as const) {
    const result = await runner.run(iptablesTools(backend, family).save, []);
    if (result.exitCode !== 0) continue; // Backend not installed or not usable: it holds nothing.
    for (const line of result.stdout.split('\n')) {
      if (line.startsWith('-A ')) rules++;
      if (/(KPROXY|KUBE)-/.test(line)) proxyLines++;
    }
  }
  return { proxyLines, rules };
}

export async function chooseBackend(runner: CommandRunner): Promise<BackendChoice> {
  const [nft, legacy] = await Promise.all([census(runner, 'nft'), census(runner, 'legacy')]);
  if (nft.proxyLines !== legacy.proxyLines) {
    const backend = legacy.proxyLines > nft.proxyLines ? 'legacy' : 'nft';
    return {
      backend,
      reason: `holds kube-proxy/kproxy rules (nft ${nft.proxyLines}, legacy ${legacy.proxyLines} lines)`,
    };
  }
  if (legacy.rules > nft.rules) {
    return { backend: 'legacy', reason: `holds more rules (nft ${nft.rules}, legacy ${legacy.rules})` };
  }
  return { backend: 'nft', reason: `default (nft ${nft.rules} rules, legacy ${legacy.rules})` };
}
