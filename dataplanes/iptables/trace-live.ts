// The rules the kernel holds now, for `kproxy trace --live --mode iptables`: both families'
// iptables-save output, from the backend that holds kproxy's rules (chosen as the daemon does).

import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import { chooseBackend, iptablesTools } from './backend.ts';

export async function readLiveIptablesRules(runner: CommandRunner): Promise<string> {
  const { backend } = await chooseBackend(runner);
  const parts: string[] = [];
  for (const family of ['IPv4', 'IPv6'] as const) {
    const { save } = iptablesTools(backend, family);
    const result = await runner.run(save, []);
    if (result.exitCode !== 0) throw new DataplaneError(`${save}: ${result.stderr.trim()}`);
    // The header names the family for the parser whatever the tool prints first.
    parts.push(`# ${family === 'IPv4' ? 'iptables' : 'ip6tables'}-save`, result.stdout);
  }
  return parts.join('\n');
}
