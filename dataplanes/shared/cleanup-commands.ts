// Cleanup's commands (contract: CleanupCommand): checking and running them with the command runner,
// and the one removal two modes share, an nft table of kproxy's (nftables mode's, IPVS mode's
// companion). A dataplane's cleanup() runs the very commands its cleanupCommands() lists, which
// `kproxy cleanup --script` writes for a purge: one list, not a second copy of the removal.

import type { CleanupCommand, ToolCheck, ToolRun } from '../../contract/dataplane.ts';
import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { CommandRunner } from './command-runner.ts';

export interface NftTableDeletion extends CleanupCommand {
  readonly input: string;
}

/** `delete table FAMILY TABLE`, run when `nft -c` accepts it: exactly while the table exists. */
export function nftTableDeletion(family: string, table: string): NftTableDeletion {
  const input = `delete table ${family} ${table}\n`;
  return {
    what: `nft table ${family} ${table}`,
    command: 'nft',
    args: ['-f', '-'],
    input,
    when: [{ command: 'nft', args: ['-c', '-f', '-'], input }],
  };
}

/** Whether every check holds now. */
export async function checksHold(runner: CommandRunner, checks: readonly ToolCheck[]): Promise<boolean> {
  for (const check of checks) {
    const result = await runner.run(check.command, check.args, check.input);
    if (result.exitCode !== 0) return false;
    if (check.printsLine !== undefined && !result.stdout.split('\n').includes(check.printsLine)) return false;
  }
  return true;
}

/** Runs a tool as a removal needs it: its refusal is the kernel's (a DataplaneError). */
export async function runRemoval(runner: CommandRunner, { command, args, input }: ToolRun): Promise<void> {
  const result = await runner.run(command, args, input);
  if (result.exitCode !== 0) {
    throw new DataplaneError(`${[command, ...args].join(' ')} failed: ${result.stderr.trim()}`);
  }
}

/** What `commands` remove, once each, in order: what cleanup() reports. */
export function removedObjects(commands: readonly CleanupCommand[]): string[] {
  return [...new Set(commands.map((command) => command.what))];
}
