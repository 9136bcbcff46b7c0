// iptables-nft-restore --noflush slows down quadratically with the number of chains one input
// declares (measured here: 2,000 services × 10 endpoints take 21 s in one input, 2 s in inputs of
// ~1,000 chains; the cost does not depend on the chains already in the kernel; why, and what it
// means for one chain with many jump targets: ENDPOINT_CHAIN_PREFIX in chain-names.ts). So a large plan
// is applied in parts: the service chains back to front (every chain only jumps to chains after
// it, see ownChains), each part with the top-level chains they jump to, then one last part with
// everything else — the shared chains that make the new service chains reachable, the filter and
// mangle tables, the jumps from the built-in chains, and the deletions. Each part is atomic;
// every reference is valid after each.
// iptables-legacy rewrites its whole table per input, so there one input stays best.
import { isServiceChain, MARK_MASQ_CHAIN, MASQ_NOT_LOCAL_CHAIN } from './chain-names.ts';
import type { Chains, FamilyPlan, TableChanges } from './plan-types.ts';

/** Service chains per iptables-nft-restore input: about a hundred services. */
export const NFT_CHAINS_PER_RESTORE = 1000;

/** Top-level chains that service chains jump to and that jump to no service chain. */
const LEAF_CHAINS = new Set([MARK_MASQ_CHAIN, MASQ_NOT_LOCAL_CHAIN]);

export function restoreParts(plan: FamilyPlan, maxChains: number): FamilyPlan[] {
  return [...restorePartsOf(plan, maxChains)];
}

/**
 * The same parts, each made when it is asked for (the live dataplane restores one before it makes
 * the next), from one pass over the plan's chains: linear at any size (100k service chains for one
 * Service with 1,000 ports × 100 endpoints).
 */
export function* restorePartsOf(plan: FamilyPlan, maxChains: number): Generator<FamilyPlan, void, void> {
  const nat = plan.tables.find((t) => t.table === 'nat');
  const serviceChains: string[] = [];
  const leaves: string[] = [];
  for (const chain of nat?.chains.keys() ?? []) {
    if (isServiceChain(chain)) serviceChains.push(chain);
    else if (LEAF_CHAINS.has(chain)) leaves.push(chain);
  }
  if (nat === undefined || serviceChains.length <= maxChains) {
    yield plan;
    return;
  }
  const withRules = (names: readonly string[]) =>
    names.map((chain) => [chain, nat.chains.get(chain)!] as const);
  for (let end = serviceChains.length; end > 0; end -= maxChains) {
    const part: Chains = new Map([
      ...withRules(leaves),
      ...withRules(serviceChains.slice(Math.max(0, end - maxChains), end)),
    ]);
    yield { family: plan.family, tables: [{ table: 'nat', chains: part, deleted: [], jumps: [] }] };
  }
  const others = new Map<string, readonly string[]>();
  for (const [chain, rules] of nat.chains) if (!isServiceChain(chain)) others.set(chain, rules);
  const rest: TableChanges = { ...nat, chains: others };
  yield { family: plan.family, tables: plan.tables.map((t) => (t === nat ? rest : t)) };
}

/** How many parts restoreParts makes, without making them. */
export function restorePartCount(plan: FamilyPlan, maxChains: number): number {
  const nat = plan.tables.find((t) => t.table === 'nat');
  let serviceChains = 0;
  for (const chain of nat?.chains.keys() ?? []) if (isServiceChain(chain)) serviceChains++;
  return serviceChains <= maxChains ? 1 : Math.ceil(serviceChains / maxChains) + 1;
}
