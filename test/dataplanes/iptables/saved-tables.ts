// iptables-save of a lab namespace, normalised for comparison: every table, chains sorted, each
// chain's rules in order (counters and policies dropped).

import type { IPFamily } from '../../../contract/base/ip-family.ts';
import type { IptablesBackend } from '../../../dataplanes/iptables/backend.ts';
import type { Lab } from '../../../harness/netns.ts';

export async function normalisedSave(
  lab: Lab,
  ns: string,
  backend: IptablesBackend,
  family: IPFamily = 'IPv4',
): Promise<string> {
  const tool = `${family === 'IPv4' ? 'iptables' : 'ip6tables'}-${backend}-save`;
  const out: string[] = [];
  for (const table of ['filter', 'mangle', 'nat']) {
    const saved = (await lab.exec(ns, tool, ['-t', table])).stdout;
    const chains = new Map<string, string[]>();
    for (const line of saved.split('\n')) {
      if (line.startsWith(':')) {
        const chain = line.split(' ')[0]!.slice(1);
        chains.set(chain, chains.get(chain) ?? []);
      }
      if (line.startsWith('-A ')) {
        const chain = line.split(' ')[1]!;
        chains.set(chain, [...(chains.get(chain) ?? []), line]);
      }
    }
    out.push(`*${table}`);
    for (const chain of [...chains.keys()].sort()) out.push(`:${chain}`, ...chains.get(chain)!);
  }
  return out.join('\n');
}
