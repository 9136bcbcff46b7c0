// What the kernel holds now, for `kproxy trace --live --mode nftables` and `kproxy diff`: kproxy's
// tables, then every other table listed alone (never `nft list ruleset`), so a table this nft
// cannot list (kubernetes#136786: another tool's, written by a newer nft) is named as not read and
// stops nothing.
import { DataplaneError } from '../../contract/dataplane-error.ts';
import type { CommandRunner } from '../shared/command-runner.ts';
import { FAMILIES } from '../shared/nft/ruleset.ts';
import { TABLE } from '../shared/nft/transaction.ts';
import { type NftListings, readForeignTables } from '../shared/trace/nft-live.ts';

/** nft's answer when the table does not exist: nothing to read, not a failure. */
const NO_TABLE = /No such file or directory/;

/** kproxy's tables as the kernel lists them now (an absent table lists as nothing). */
export async function readLiveKproxyTables(runner: CommandRunner): Promise<NftListings> {
  let text = '';
  const unreadable: string[] = [];
  for (const family of FAMILIES) {
    const result = await runner.run('nft', ['list', 'table', family, TABLE]);
    if (result.exitCode === 0) text += result.stdout;
    else if (!NO_TABLE.test(result.stderr))
      unreadable.push(`table ${family} ${TABLE}: ${result.stderr.trim()}`);
  }
  return { text, unreadable };
}

/**
 * kproxy's tables and the others, as one listing; `onUnreadable` hears each table not read. Fails
 * only when kproxy's own tables cannot be read.
 */
export async function readLiveNftRuleset(
  runner: CommandRunner,
  onUnreadable: (reason: string) => void = () => {},
): Promise<string> {
  const own = await readLiveKproxyTables(runner);
  if (own.unreadable.length > 0) throw new DataplaneError(own.unreadable.join('; '));
  const others = await readForeignTables(runner, TABLE);
  for (const reason of others.unreadable) onUnreadable(reason);
  return own.text + others.text;
}
