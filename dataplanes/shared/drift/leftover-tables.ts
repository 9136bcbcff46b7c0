// Other kproxy modes' nft tables (`ip kproxy`, `ip6 kproxy-ipvs`, ...) on a node running another
// mode: extra, whoever they served (`kproxy cleanup` removes them; so does `kproxy run` after its
// first full sync).
import type { CommandRunner } from '../command-runner.ts';
import { KPROXY_TABLES } from '../trace/nft.ts';
import { type DriftPiece, NODE_WIDE } from './drift-report.ts';

const MODE_OF_TABLE: Readonly<Record<string, string>> = { kproxy: 'nftables', 'kproxy-ipvs': 'ipvs' };

/** Every kproxy table but `own` (the mode's own, when it has one), as an extra piece. */
export async function leftoverTables(
  runner: CommandRunner,
  own?: string,
): Promise<{ pieces: DriftPiece[]; unreadable: string[] }> {
  const listed = await runner.run('nft', ['list', 'tables']);
  if (listed.exitCode !== 0) return { pieces: [], unreadable: [`nft list tables: ${listed.stderr.trim()}`] };
  const pieces: DriftPiece[] = [];
  for (const line of listed.stdout.split('\n')) {
    const [word, family, name = ''] = line.trim().split(/\s+/);
    if (word !== 'table' || !KPROXY_TABLES.has(name) || name === own) continue;
    const text = `table ${family} ${name}: the ${MODE_OF_TABLE[name] ?? name} mode's leftover`;
    pieces.push({ kind: 'extra', service: NODE_WIDE, where: `${family} ${name}`, text });
  }
  return { pieces, unreadable: [] };
}
