// iptables-nft-restore --noflush slows down quadratically with the number of chains one input
// declares (measured here: 2,000 services × 10 endpoints take 21 s in one input, 2 s in inputs of
// ~1,000 chains; the cost does not depend on the chains already in the kernel). So a large plan
// is applied in parts: the service chains back to front (every chain only jumps to chains after
// it, see ownChains), each part with the top-level chains they jump to, then one last part with
// everything else — the shared chains that make the new service chains reachable, the filter and
// mangle tables, and the deletions. Each part is atomic; every reference is valid after each.
// iptables-legacy rewrites its whole table per input, so there one input stays best.
import { isServiceChain, MARK_MASQ_CHAIN, MASQ_NOT_LOCAL_CHAIN } from './chain-names.ts';
import type { Chains, FamilyPlan, TableChanges } from './restore-plan.ts';

/** Top-level chains that service chains jump to and that jump to no service chain. */
const LEAF_CHAINS = new Set([MARK_MASQ_CHAIN, MASQ_NOT_LOCAL_CHAIN]);

export function restoreParts(plan: FamilyPlan, maxChains: number): FamilyPlan[] {
  const nat = plan.tables.find((t) => t.table === 'nat');
  const serviceChains = nat ? [...nat.chains].filter(([chain]) => isServiceChain(chain)) : [];
  if (nat === undefined || serviceChains.length <= maxChains) return [plan];
  const leaves = [...nat.chains].filter(([chain]) => LEAF_CHAINS.has(chain));
  const parts: FamilyPlan[] = [];
  for (let end = serviceChains.length; end > 0; end -= maxChains) {
    const part: Chains = new Map([...leaves, ...serviceChains.slice(Math.max(0, end - maxChains), end)]);
    parts.push({ family: plan.family, tables: [{ table: 'nat', chains: part, deleted: [] }] });
  }
  const rest: TableChanges = {
    ...nat,
    chains: new Map([...nat.chains].filter(([chain]) => !isServiceChain(chain))),
  };
  parts.push({ family: plan.family, tables: plan.tables.map((t) => (t === nat ? rest : t)) });
  return parts;
}
