// Adoption: what is in our table, read cheaply, so that a restart or a full sync rewrites it in
// place (one transaction, no table replaced under traffic, affinity state kept) instead of
// replacing it (planner.ts planInPlace).
//
// Elements are NOT read back: nft 1.0.6 takes 10-40 s to list 30k services x 10 endpoints (about
// 30 us per element, even with -t), longer than the full sync itself. What is read:
// - the chain names (`nft -j list chains`, ~30 ms at any size): adopted chains carry
//   UNKNOWN_RULES, so the first sync rewrites those still wanted and deletes the others; an
//   affinity endpoint chain has a set of the same name, deleted with it when no longer wanted.
// (Stale UDP flows need no record of the earlier run: the conntrack reconciler judges each flow by
// the endpoints serving now, dataplanes/shared/conntrack.)
// The first sync flushes every map and set kproxy fills and adds the wanted elements (diff.ts).
// Set definitions are taken on trust: `add` of an existing set is a no-op, and one that differs
// makes nft refuse the transaction, then the dataplane replaces the table. A set an older kproxy
// made and this one does not know (other than an affinity endpoint chain's) stays until the table
// is replaced: `nft -j list sets` would tell, but it lists every element too.
import { type FamilyRuleset, UNKNOWN_RULES } from '../shared/nft/ruleset.ts';
import { type ChainSpec, type NftFamily, type SetSpec, TABLE } from '../shared/nft/transaction.ts';

type Json = null | boolean | number | string | Json[] | { readonly [key: string]: Json };

function objectsOf(listing: unknown): Record<string, Record<string, Json>>[] {
  return (listing as { nftables?: Record<string, Record<string, Json>>[] } | undefined)?.nftables ?? [];
}

/** An affinity endpoint chain: `affinity-<hash>`, with a dynamic set of the same name. */
const AFFINITY_ENDPOINT_CHAIN = /^affinity-[0-9a-f]{16}$/;

/** The record of our table from `nft -j list chains FAMILY`; undefined when there is none. */
export function adoptTable(family: NftFamily, chainListing: unknown): FamilyRuleset | undefined {
  const chains = new Map<string, ChainSpec>();
  const sets = new Map<string, SetSpec>();
  for (const object of objectsOf(chainListing)) {
    const chain = object.chain;
    if (chain?.table !== TABLE || chain.family !== family) continue;
    const name = String(chain.name);
    chains.set(name, { name, rules: UNKNOWN_RULES });
    if (AFFINITY_ENDPOINT_CHAIN.test(name)) sets.set(name, { name, kind: 'set', type: 'adopted' });
  }
  if (chains.size === 0) return undefined;
  return { family, sets, chains, elements: new Map(), adopted: true };
}

/** The nonce in a canary set listing (`nft -j list set`), if there is one. */
export function canaryNonce(listing: unknown): number | undefined {
  for (const object of objectsOf(listing)) {
    const set = object.set;
    if (Array.isArray(set?.elem) && set.elem.length === 1) return Number(set.elem[0]);
  }
  return undefined;
}
