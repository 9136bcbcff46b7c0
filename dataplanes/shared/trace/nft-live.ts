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
 * Every table but `own` and the drift checks' scratch tables (other owners', other kproxy modes'
 * leftovers), each listed alone.
 */
export async function readForeignTables(runner: CommandRunner, own: string): Promise<NftListings> {
  const tables = await runner.run('nft', ['list', 'tables']);
  if (tables.exitCode !== 0) return { text: '', unreadable: [`nft list tables: ${tables.stderr.trim()}`] };
  let text = '';
  const unreadable: string[] = [];
  for (const line of tables.stdout.split('\n')) {
    const [word, family, name] = line.trim().split(/\s+/);
    if (word !== 'table' || family === undefined || name === undefined) continue;
    if (name === own || isScratchTable(name)) continue;
    const listed = await runner.run('nft', ['list', 'table', family, name]);
    if (listed.exitCode === 0) text += listed.stdout;
    else
      unreadable.push(`table ${family} ${name}: ${listed.stderr.trim() || `nft exited ${listed.exitCode}`}`);
  }
  return { text, unreadable };
}
