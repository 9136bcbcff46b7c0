// The iptables tables one backend holds, read without creating any. `iptables-legacy-save -t nat`
// (like `iptables-legacy -L`) instantiates the legacy nat table in the namespace, after which every
// iptables-nft-save warns "iptables-legacy tables present"; a save without -t dumps only the tables
// that exist (legacy: those in /proc/net/ip_tables_names). Verified in a fresh namespace with
// iptables 1.8.9: neither iptables-nft-save nor iptables-legacy-save without -t creates a table.
import type { CommandRunner } from './command-runner.ts';

/** Sections of iptables-save output ("*nat" ... "COMMIT") by table name. */
export function savedTableSections(saved: string): Map<string, string> {
  const sections = new Map<string, string>();
  let table: string | undefined;
  let lines: string[] = [];
  for (const line of saved.split('\n')) {
    if (line.startsWith('*')) {
      table = line.slice(1).trim();
      lines = [line];
    } else if (table !== undefined) {
      lines.push(line);
      if (line === 'COMMIT') {
        sections.set(table, `${lines.join('\n')}\n`);
        table = undefined;
      }
    }
  }
  return sections;
}

/** The tables `saveTool` (iptables-nft-save, ip6tables-legacy-save, ...) holds; none when it fails. */
export async function existingIptablesTables(
  runner: CommandRunner,
  saveTool: string,
): Promise<Map<string, string>> {
  const result = await runner.run(saveTool, []);
  // Not installed, or no kernel support: that backend holds nothing.
  return result.exitCode === 0 ? savedTableSections(result.stdout) : new Map();
}
