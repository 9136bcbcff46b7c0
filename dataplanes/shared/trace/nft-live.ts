// The other owners' nft tables as the kernel holds them now, for `trace --live` and `kproxy diff`
// in the nft-based modes: every table but the mode's own, listed alone (never `nft list ruleset`),
// so a table this nft cannot list (kubernetes#136786: another tool's, written by a newer nft) is
// named as not read and stops nothing. A drift check's scratch table (another kproxy's `diff` or
// daemon, for the moment it lasts) is nobody's rules: dormant, on no hook, passed over.
import type { CommandRunner } from '../command-runner.ts';
import { isScratchTable } from '../nft/scratch-table.ts';

/** Listings read from the kernel, and what could not be read. */
export interface NftListings {
  readonly text: string;
  readonly unreadable: readonly string[];
}

/**
 * Every table's family and name, from `nft list chains`: nft 1.0.6 answers `list tables` only after
 * fetching every element of every set (20 s at 30,000 Services × 10 endpoints), `list chains` in a
 * tenth of a second, and it names every table, one without chains too.
 */
export async function listTableNames(
  runner: CommandRunner,
): Promise<{ tables: { family: string; name: string }[] } | { error: string }> {
  const listed = await runner.run('nft', ['list', 'chains']);
  if (listed.exitCode !== 0) return { error: `nft list chains: ${listed.stderr.trim()}` };
  const tables: { family: string; name: string }[] = [];
  for (const line of listed.stdout.split('\n')) {
    const [word, family, name] = line.split(' ');
    if (word === 'table' && family !== undefined && name !== undefined) tables.push({ family, name });
  }
  return { tables };
}

/**
 * Every table but `own` and the drift checks' scratch tables (other owners', other kproxy modes'
 * leftovers), each listed alone.
 */
export async function readForeignTables(runner: CommandRunner, own: string): Promise<NftListings> {
  const names = await listTableNames(runner);
  if ('error' in names) return { text: '', unreadable: [names.error] };
  let text = '';
  const unreadable: string[] = [];
  for (const { family, name } of names.tables) {
    if (name === own || isScratchTable(name)) continue;
    const listed = await runner.run('nft', ['list', 'table', family, name]);
    if (listed.exitCode === 0) text += listed.stdout;
    else
      unreadable.push(`table ${family} ${name}: ${listed.stderr.trim() || `nft exited ${listed.exitCode}`}`);
  }
  return { text, unreadable };
}
