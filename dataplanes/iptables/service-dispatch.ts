// KPROXY-SERVICES's service address rules, reached through a fixed two-level tree of chains keyed by
// the low bits of the destination address, instead of one list the first packet of every connection
// walks: kube-proxy's KUBE-SERVICES is linear, 24 µs to the first and 518 µs to the last of 30,000
// services; here a packet meets at most 32 + 32 bucket jumps and its leaf's rules (~30 at 30k).
//
// What a packet meets is the same: every service rule matches one destination address, so the rules
// a packet could match all sit in one leaf, in the order KPROXY-SERVICES held them; a leaf that
// matches nothing (or a chain that falls through) returns up the tree, and the packet goes on to the
// node port jump as before. The shape does not depend on the other Services: a change of one
// Service's addresses rewrites only its leaves (and their parents when a leaf appears or empties).
import ipaddr from 'ipaddr.js';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { SERVICE_DISPATCH_CHAIN_PREFIX, SERVICES_CHAIN } from './chain-names.ts';
import { comment, type ServiceAddressRule } from './service-port-rules.ts';

/**
 * Bits of the address each level keys on: 32 first-level chains, 32 leaves under each. Measured at
 * 30,000 services (docs/benchmarks.md): the last service's connect within 1.3× the first's.
 */
const BITS_PER_LEVEL = 5;
const LEVELS = [BITS_PER_LEVEL, 2 * BITS_PER_LEVEL] as const;

/** The low `bits` of an address (bits ≤ 16: within IPv6's last group). */
function lowBits(address: string, bits: number): number {
  const bytes = ipaddr.parse(address).toByteArray();
  const low = (bytes.at(-2)! << 8) | bytes.at(-1)!;
  return low & ((1 << bits) - 1);
}

/** `-d VALUE/MASK` on the low bits, written as iptables-save prints it (an address-form mask). */
function lowBitsMatch(family: IPFamily, value: number, bits: number): string {
  const mask = (1 << bits) - 1;
  return `-d ${addressOfLowBits(family, value)}/${addressOfLowBits(family, mask)}`;
}

function addressOfLowBits(family: IPFamily, value: number): string {
  if (family === 'IPv4') return `0.0.${value >>> 8}.${value & 255}`;
  return ipaddr.fromByteArray([...new Array<number>(14).fill(0), value >>> 8, value & 255]).toString();
}

/** The chain of the bucket `value` at `level` (1 or 2): KPROXY-SVB-1-1F, KPROXY-SVB-2-3FF. */
function bucketChain(level: number, value: number): string {
  const digits = Math.ceil(LEVELS[level - 1]! / 4);
  return `${SERVICE_DISPATCH_CHAIN_PREFIX}${level}-${value.toString(16).toUpperCase().padStart(digits, '0')}`;
}

export interface ServiceDispatch {
  /** The jumps into the first level, for KPROXY-SERVICES (before its node port jump). */
  readonly head: readonly string[];
  /** The bucket chains, parents before their children (a restore writes them back to front). */
  readonly chains: ReadonlyMap<string, readonly string[]>;
}

/**
 * The tree for `rules`. Only buckets that hold a rule exist. Each leaf keeps its rules in descending
 * order of the chain each jumps to (they match distinct destinations, so any order is the same
 * ruleset; kube-proxy's follows a Go map's), and every chain's jumps are in that order too: the order
 * in which iptables-nft-restore finds each name at the head of its list (dispatchRulesInWriteOrder).
 */
export function serviceDispatch(family: IPFamily, rules: readonly ServiceAddressRule[]): ServiceDispatch {
  const [top, leafBits] = LEVELS;
  const leaves = new Map<number, string[]>();
  for (const { destination, spec } of byTargetDescending(rules, (rule) => rule.spec)) {
    const leaf = lowBits(destination, leafBits);
    const rule = `-A ${bucketChain(2, leaf)} ${spec}`;
    const list = leaves.get(leaf);
    if (list === undefined) leaves.set(leaf, [rule]);
    else list.push(rule);
  }
  const parents = new Map<number, number[]>();
  for (const leaf of [...leaves.keys()].sort((a, b) => b - a)) {
    const parent = leaf & ((1 << top) - 1);
    const children = parents.get(parent);
    if (children === undefined) parents.set(parent, [leaf]);
    else children.push(leaf);
  }
  const jump = (from: string, level: number, value: number) => {
    const bits = LEVELS[level - 1]!;
    return `-A ${from} ${comment(`service IPs by their low ${bits} bits`)} ${lowBitsMatch(family, value, bits)} -j ${bucketChain(level, value)}`;
  };
  const firstLevel = [...parents.keys()].sort((a, b) => b - a);
  const chains = new Map<string, readonly string[]>();
  for (const parent of firstLevel) {
    const chain = bucketChain(1, parent);
    chains.set(
      chain,
      parents.get(parent)!.map((leaf) => jump(chain, 2, leaf)),
    );
  }
  for (const [leaf, list] of leaves) chains.set(bucketChain(2, leaf), list);
  return { head: firstLevel.map((parent) => jump(SERVICES_CHAIN, 1, parent)), chains };
}

/** A chain of the tree (KPROXY-SVB-*). */
export function isDispatchChain(chain: string): boolean {
  return chain.startsWith(SERVICE_DISPATCH_CHAIN_PREFIX);
}

/**
 * The rules of the tree's chains in the order a restore input writes them: all together in
 * descending order of the chain each jumps to, each chain's own order kept (a stable sort of rules
 * each chain already holds in that order). iptables-nft-restore --noflush (1.8.9) keeps the chain
 * names an input mentions in a sorted list walked from its head on each mention
 * (ENDPOINT_CHAIN_PREFIX in chain-names.ts): chain by chain, each leaf's jump to a Service chain
 * walked past half of those the leaves before had named (30,000 services: ~225M steps); in
 * descending order each is the smallest of its kind yet.
 */
export function dispatchRulesInWriteOrder(rules: readonly string[]): string[] {
  return byTargetDescending(rules, (rule) => rule);
}

function byTargetDescending<T>(items: readonly T[], text: (item: T) => string): T[] {
  const target = (line: string) => line.slice(line.lastIndexOf(' -j ') + 4);
  return items
    .map((item) => ({ item, target: target(text(item)) }))
    .sort((a, b) => (a.target < b.target ? 1 : a.target > b.target ? -1 : 0))
    .map(({ item }) => item);
}
