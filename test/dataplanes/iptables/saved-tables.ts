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
  // One save of every table, split at its `*table` lines (a table's lines are what `-t table`
  // prints); a table it does not list is saved on its own, as before (`-t` lists it anyway).
  const all = splitTables((await lab.exec(ns, tool, [])).stdout);
  const out: string[] = [];
  for (const table of ['filter', 'mangle', 'nat']) {
    const saved = all.get(table) ?? (await lab.exec(ns, tool, ['-t', table])).stdout;
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

/** iptables-save output by table (each table's lines, its `*table` line included). */
function splitTables(saved: string): Map<string, string> {
  const tables = new Map<string, string>();
  for (const section of saved.split(/^(?=\*)/m)) {
    const name = /^\*(\S+)/.exec(section)?.[1];
    if (name !== undefined) tables.set(name, section);
  }
  return tables;
}
