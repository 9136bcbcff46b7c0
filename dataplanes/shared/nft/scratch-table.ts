// A render loaded into the node's own network namespace, so the kernel lists it back as it lists
// kproxy's live tables (`kproxy diff`, the daemon's drift check: ../drift/nft-tables.ts), without
// a namespace of its own: the packaged unit may create none (no CAP_SYS_ADMIN,
// RestrictNamespaces=yes), but CAP_NET_ADMIN creates tables. The render's objects go into a table
// of another name, created
// - dormant: its base chains are registered on no hook, so it touches no packet;
// - owned (`flags owner`, Linux 5.12): the kernel deletes it when the netlink socket of the nft
//   that made it closes, however that nft ends (SIGKILL included), so a check cut short leaves
//   nothing behind and no later one has to sweep;
// - under a name of its own per check, so two checks (the daemon's, an operator's `kproxy diff`)
//   never meet: another owner's table cannot be changed, only listed.
// The render's table operations are followed, not copied: each would undo these flags (`add
// table` without them updates the table to none) or end the table's ownership (`delete table`).
// A family's table exists as they leave it (a full plan removes the table of a family without
// state: `add` then `delete`), holding the objects added since it was last deleted.
import { type NftFamily, type NftOp, NftTransaction } from './transaction.ts';

/** Every scratch table's name begins so: readers of the live ruleset pass them over. */
export const SCRATCH_TABLE_PREFIX = 'kproxy-drift-';

export function isScratchTable(name: string): boolean {
  return name.startsWith(SCRATCH_TABLE_PREFIX);
}

/** A render as a scratch table: the script that makes and fills it, and the families it has. */
export interface ScratchTable {
  readonly script: string;
  readonly families: readonly NftFamily[];
}

/**
 * The objects of `transactions` (a full plan's, in order) as one `nft -f` script that creates
 * `table` dormant and owned in each family they use, and fills it. Pure: the caller names the table.
 */
export function scratchTable(
  transactions: Iterable<NftTransaction | undefined>,
  table: string,
): ScratchTable {
  if (!isScratchTable(table)) throw new Error(`scratch table ${table} is not named ${SCRATCH_TABLE_PREFIX}*`);
  // Each family's objects since its table was last added; none while it is deleted.
  const objects = new Map<NftFamily, NftOp[]>();
  for (const tx of transactions) {
    for (const op of tx?.ops ?? []) {
      if (op.object !== 'table') objects.get(op.family)?.push(op);
      else if (op.verb === 'delete') objects.delete(op.family);
      else if (!objects.has(op.family)) objects.set(op.family, []);
    }
  }
  const body = new NftTransaction(table);
  for (const ops of objects.values()) for (const op of ops) body.push(op);
  const families = [...objects.keys()];
  const header = families
    .map((family) => `add table ${family} ${table} { flags dormant; flags owner; }\n`)
    .join('');
  return { script: header + body.toString(), families };
}
