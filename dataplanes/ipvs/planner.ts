// The IPVS planner: DualStackState → virtual servers, dummy-link addresses and the companion nft
// table, in full or as the delta between two states (pure, deterministic).
//
// An incremental plan builds only the changed service ports' pieces (incremental-ports.ts adds the
// unchanged ports that share an address, node port or hairpin pair with them, so each piece it
// compares is what the whole state holds), unless a family or the node settings changed, or a
// ClientIP chain comes or goes: then the two whole desired states are compared.
import { isDeepStrictEqual } from 'node:util';
import { compareText } from '../../contract/base/compare-text.ts';
import type { IPFamily } from '../../contract/base/ip-family.ts';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import type { DataplanePlanner } from '../../contract/dataplane.ts';
import type { DualStackState, ServicePortKey } from '../../contract/proxy-state.ts';
import { diffFamily, diffRulesets } from '../shared/nft/diff.ts';
import { hooksLastTransactions, joinedTransaction } from '../shared/nft/hooks-last.ts';
import type { DesiredRuleset, FamilyRuleset } from '../shared/nft/ruleset.ts';
import { NftTransaction } from '../shared/nft/transaction.ts';
import { COMPANION_TABLE, companionPortElements, companionRuleset } from './companion-ruleset.ts';
import { incrementalPorts } from './incremental-ports.ts';
import { diffAddresses, diffVirtualServers } from './ipvs-diff.ts';
import { FAMILIES, type IpvsDesired, type IpvsPlan } from './ipvs-plan.ts';
import { planInputs, renderPlan } from './ipvs-render.ts';
import { SharingIndex } from './sharing-index.ts';
import { ipvsFamilyServers, type VirtualServer } from './virtual-servers.ts';

export interface IpvsPlannerOptions {
  /** IPVS scheduler of every virtual server (kube-proxy's ipvs.scheduler; default rr). */
  readonly scheduler: string;
}

interface Desired {
  readonly ipvs: IpvsDesired;
  readonly nft: DesiredRuleset;
}

function desired(state: DualStackState, options: IpvsPlannerOptions): Desired {
  const virtualServers = new Map<string, VirtualServer>();
  const bound: string[] = [];
  const nodePortAddresses: string[] = [];
  const nft: { ip?: DesiredRuleset['ip']; ip6?: DesiredRuleset['ip6'] } = {};
  for (const family of FAMILIES) {
    const familyState = state[family];
    if (!familyState) continue;
    const servers = ipvsFamilyServers(familyState, options.scheduler);
    for (const [key, vs] of servers.virtualServers) virtualServers.set(key, vs);
    bound.push(...servers.boundAddresses);
    nodePortAddresses.push(...servers.nodePortAddresses);
    nft[family === 'IPv4' ? 'ip' : 'ip6'] = companionRuleset(familyState, servers);
  }
  return { ipvs: { virtualServers, boundAddresses: bound.sort(compareText), nodePortAddresses }, nft };
}

/** The IPVS desired state of `state` (what a full sync must leave in the kernel). */
export function ipvsDesired(state: DualStackState, options: IpvsPlannerOptions): IpvsDesired {
  return desired(state, options).ipvs;
}

/** The companion nftables tables' content for `state` (what the intact check expects there). */
export function companionDesired(state: DualStackState, options: IpvsPlannerOptions): DesiredRuleset {
  return desired(state, options).nft;
}

export type IncrementalIpvsPlan = Extract<IpvsPlan, { kind: 'incremental' }>;

/** Per family, the sharing index (sharing-index.ts) of the state the kernel holds. */
export type SharingIndexes = Map<IPFamily, SharingIndex>;

/** An incremental plan and what it changes in the record of what the kernel holds. */
export interface IpvsIncremental {
  readonly plan: IncrementalIpvsPlan;
  /**
   * The record's virtual servers the plan changes, by key: the new one, or undefined when it goes.
   * Bound addresses change as plan.addresses says.
   */
  readonly virtualServers: ReadonlyMap<string, VirtualServer | undefined>;
  /** Once the plan is applied: takes the sharing indexes the plan was given to the next state. */
  commit(): void;
}

/**
 * What takes a kernel holding planFull(prev) to planFull(next). `changed`, when the caller knows
 * it, is exactly the service ports that differ (else the states are compared). `sharing` holds
 * the sharing indexes of `prev` the caller keeps (the live dataplane's); a missing one is built
 * and added.
 */
export function ipvsIncremental(
  prev: DualStackState,
  next: DualStackState,
  options: IpvsPlannerOptions,
  changed?: ReadonlySet<ServicePortKey>,
  sharing: SharingIndexes = new Map(),
): IpvsIncremental {
  const wholeDiff = FAMILIES.some((family) => {
    const before = prev[family];
    const after = next[family];
    return !before !== !after || (before && after && !isDeepStrictEqual(before.node, after.node));
  });
  if (wholeDiff) return wholeStateIncremental(prev, next, options, sharing);
  const before = { virtualServers: new Map<string, VirtualServer>(), bound: [] as string[] };
  const after = { virtualServers: new Map<string, VirtualServer>(), bound: [] as string[] };
  const nft = new NftTransaction(COMPANION_TABLE);
  const recordChanges = new Map<string, VirtualServer | undefined>();
  const commits: (() => void)[] = [];
  for (const family of FAMILIES) {
    const prevState = prev[family];
    const nextState = next[family];
    if (!prevState || !nextState) continue;
    const familyChanged = changed ?? changedServicePorts(prevState, nextState);
    if (familyChanged.size === 0) continue;
    const index = sharing.get(family) ?? SharingIndex.of(prevState);
    sharing.set(family, index);
    const ports = incrementalPorts(prevState, nextState, familyChanged, index);
    const serversBefore = ipvsFamilyServers(prevState, options.scheduler, ports.before);
    const serversAfter = ipvsFamilyServers(nextState, options.scheduler, ports.after);
    for (const [key, vs] of serversBefore.virtualServers) before.virtualServers.set(key, vs);
    for (const [key, vs] of serversAfter.virtualServers) after.virtualServers.set(key, vs);
    before.bound.push(...serversBefore.boundAddresses);
    after.bound.push(...serversAfter.boundAddresses);
    const [elementsBefore, elementsAfter] = sameSetNames(
      companionPortElements(prevState, ports.before, serversBefore, ports.hairpinBefore),
      companionPortElements(nextState, ports.after, serversAfter, ports.hairpinAfter),
    );
    // A ClientIP chain (per timeout, per protocol and real-server count) that comes or goes with
    // these ports may be used by ports not built here: whether it stays is the whole state's
    // question. Same chains before and after: the whole state's chains are unchanged too.
    if (!sameNames(elementsBefore.chains, elementsAfter.chains))
      return wholeStateIncremental(prev, next, options, sharing);
    diffFamily(nft, elementsBefore, elementsAfter);
    // The unchanged ports built beside the changed ones hold the same pieces before and after.
    for (const [key, vs] of serversBefore.virtualServers) {
      if (familyChanged.has(vs.servicePort)) recordChanges.set(key, undefined);
    }
    for (const [key, vs] of serversAfter.virtualServers) {
      if (familyChanged.has(vs.servicePort) || recordChanges.has(key)) recordChanges.set(key, vs);
    }
    commits.push(() => index.update(prevState, nextState, familyChanged));
  }
  // Pieces of the whole desired states, in the same order (IPv4 first, keys sorted per family).
  const partial = (side: typeof before): IpvsDesired => ({
    virtualServers: side.virtualServers,
    boundAddresses: side.bound.sort(compareText),
    nodePortAddresses: [],
  });
  const [from, to] = [partial(before), partial(after)];
  const plan: IncrementalIpvsPlan = {
    kind: 'incremental',
    ops: diffVirtualServers(from, to),
    addresses: diffAddresses(from.boundAddresses, to.boundAddresses),
    nft,
  };
  return {
    plan,
    virtualServers: recordChanges,
    commit: () => {
      for (const commit of commits) commit();
    },
  };
}

/**
 * The diff of the two whole desired states: when a family or the node settings changed, or a
 * ClientIP chain comes or goes. The sharing indexes are then built anew when next needed.
 */
function wholeStateIncremental(
  prev: DualStackState,
  next: DualStackState,
  options: IpvsPlannerOptions,
  sharing: SharingIndexes,
): IpvsIncremental {
  const before = desired(prev, options);
  const after = desired(next, options);
  const recordChanges = new Map<string, VirtualServer | undefined>();
  for (const key of before.ipvs.virtualServers.keys()) recordChanges.set(key, undefined);
  for (const [key, vs] of after.ipvs.virtualServers) recordChanges.set(key, vs);
  return {
    plan: {
      kind: 'incremental',
      ops: diffVirtualServers(before.ipvs, after.ipvs),
      addresses: diffAddresses(before.ipvs.boundAddresses, after.ipvs.boundAddresses),
      nft: diffRulesets(before.nft, after.nft, COMPANION_TABLE),
    },
    virtualServers: recordChanges,
    commit: () => sharing.clear(),
  };
}

function sameNames(a: ReadonlyMap<string, unknown>, b: ReadonlyMap<string, unknown>): boolean {
  return a.size === b.size && [...a.keys()].every((name) => b.has(name));
}

/**
 * Both element sets with the sets either has (empty where one has none), in name order: the diff
 * walks the sets of its second argument only, so a set emptied by the change must be there.
 */
function sameSetNames(a: FamilyRuleset, b: FamilyRuleset): [FamilyRuleset, FamilyRuleset] {
  const names = [...new Set([...a.elements.keys(), ...b.elements.keys()])].sort(compareText);
  const withAll = (r: FamilyRuleset): FamilyRuleset => ({
    ...r,
    elements: new Map(names.map((name) => [name, r.elements.get(name) ?? new Map()])),
  });
  return [withAll(a), withAll(b)];
}

export function createIpvsPlanner(options: IpvsPlannerOptions): DataplanePlanner<IpvsPlan> {
  return {
    mode: 'ipvs',
    planFull(state) {
      const d = desired(state, options);
      const coldStart = hooksLastTransactions(d.nft, COMPANION_TABLE);
      return { kind: 'full', desired: d.ipvs, nft: joinedTransaction(coldStart), coldStart };
    },
    planIncremental: (prev, next) => ipvsIncremental(prev, next, options).plan,
    inputs: (plan) => planInputs(plan, false),
    render: (plan) => renderPlan(plan, false),
    chunkInputs: (plan) => planInputs(plan, true),
    renderChunks: (plan) => renderPlan(plan, true),
  };
}

export const ipvsPlanner: DataplanePlanner<IpvsPlan> = createIpvsPlanner({ scheduler: 'rr' });
