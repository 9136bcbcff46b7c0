// The ruleset the kernel holds now, for `kproxy trace --live --mode nftables`.

import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { CommandRunner } from '../shared/command-runner.ts';

export async function readLiveNftRuleset(runner: CommandRunner): Promise<string> {
  const result = await runner.run('nft', ['list', 'ruleset']);
  if (result.exitCode !== 0) throw new DataplaneError(`nft list ruleset: ${result.stderr.trim()}`);
  return result.stdout;
}
