// iptables-save of a lab namespace, normalised for comparison: every table, chains sorted, each
// chain's rules in order (counters and policies dropped, and built-in chains without rules: a table
// the save does not list, which `-t` would create only to list those, is the same as an empty one).

import type { IPFamily } from '../../../contract/base/ip-family.ts';
import type { IptablesBackend } from '../../../dataplanes/iptables/backend.ts';
import type { Lab } from '../../../harness/netns.ts';

const BUILT_IN = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

export async function normalisedSave(
  lab: Lab,
  ns: string,
  backend: IptablesBackend,
  family: IPFamily = 'IPv4',
): Promise<string> {
  const tool = `${family === 'IPv4' ? 'iptables' : 'ip6tables'}-${backend}-save`;
  // One save of every table, split at its `*table` lines (a table's lines are what `-t table`
  // prints).
  const all = splitTables((await lab.exec(ns, tool, [])).stdout);
  const out: string[] = [];
  for (const table of ['filter', 'mangle', 'nat']) {
    const saved = all.get(table) ?? '';
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
    for (const chain of [...chains.keys()].sort()) {
      const rules = chains.get(chain)!;
      if (rules.length > 0 || !BUILT_IN.has(chain)) out.push(`:${chain}`, ...rules);
    }
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
