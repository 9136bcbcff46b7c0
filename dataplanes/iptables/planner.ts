// The iptables planner: DualStackState → iptables-restore input per family (pure, deterministic).
//
// Full: every KPROXY chain declared (created or flushed) and refilled, restored with --noflush so
// nobody else's chains are touched, and the jumps from the built-in chains inserted, as on an
// empty node; stale chains and jumps already in place are the live dataplane's business (it knows
// what the kernel holds). Incremental: like kube-proxy's partial sync but cheaper: only chains whose
// content differs are rewritten — top-level chains included — and chains that went away are
// deleted. Chain contents are compared, so an unchanged service port costs nothing even when the
// caller calls it changed.

import { runAll, type Steps } from '../../contract/base/work-slices.ts';
import { changedServicePorts } from '../../contract/changed-service-ports.ts';
import type { DataplanePlanner } from '../../contract/dataplane.ts';
import type {
  DualStackState,
  Endpoint,
  EndpointList,
  ProxyState,
  ServicePort,
} from '../../contract/proxy-state.ts';
import { CANARY_CHAIN, endpointAddress, endpointChainName } from './chain-names.ts';
import { type FamilyContext, familyContext } from './family-context.ts';
import { jumpsOf } from './jump-rules.ts';
import type { Chains, FamilyPlan, IptablesPlan, TableChanges } from './plan-types.ts';
import { NFT_CHAINS_PER_RESTORE } from './restore-chunks.ts';
import { FAMILIES, planInputs, planInputsInParts, renderPlan, renderPlanInParts } from './restore-plan.ts';
import {
  appendSharedRules,
  emptySharedRules,
  endpointChains,
  ownChains,
  policyChains,
  sameEndpointChains,
} from './service-port-rules.ts';
import { countsLocalhostNodePorts, type TopLevelChains, topLevelChains } from './top-level-chains.ts';

export const iptablesPlanner: DataplanePlanner<IptablesPlan> = {
  mode: 'iptables',
  planFull: (state) => runAll(fullPlanSteps(state)),
  planIncremental: (prev, next) => runAll(incrementalPlanSteps(prev, next)),
  inputs: planInputs,
  render: renderPlan,
  chunkInputs: (plan) => planInputsInParts(plan, NFT_CHAINS_PER_RESTORE),
  renderChunks: (plan) => renderPlanInParts(plan, NFT_CHAINS_PER_RESTORE),
};

/**
 * planFull in steps, one per service port (work-slices.ts): the live dataplane plans in slices, so
 * a large cluster or a Service with thousands of ports never holds up the event loop for long.
 */
export function* fullPlanSteps(state: DualStackState): Steps<IptablesPlan> {
  return {
    kind: 'full',
    IPv4: state.IPv4 && (yield* familyFullSteps(state.IPv4)),
    IPv6: state.IPv6 && (yield* familyFullSteps(state.IPv6)),
  };
}

/** planIncremental in steps, one per changed service port. */
export function* incrementalPlanSteps(prev: DualStackState, next: DualStackState): Steps<IptablesPlan> {
  const plan: { kind: 'incremental'; IPv4?: FamilyPlan; IPv6?: FamilyPlan } = { kind: 'incremental' };
  for (const family of FAMILIES) plan[family] = yield* familyIncrementalSteps(prev[family], next[family]);
  return plan;
}

/** The canary: a chain with one harmless rule, so that both -X and -F of a table remove it. */
const CANARY: Chains = new Map([[CANARY_CHAIN, [`-A ${CANARY_CHAIN} -j RETURN`]]]);

export function planFamilyFull(state: ProxyState): FamilyPlan {
  return runAll(familyFullSteps(state));
}

function* familyFullSteps(state: ProxyState): Steps<FamilyPlan> {
  const ctx = familyContext(state);
  const top = topLevelChains(state, ctx);
  const nat = new Map([...CANARY, ...top.nat]);
  for (const sp of state.servicePorts.values()) {
    for (const [chain, rules] of ownChains(sp, ctx)) nat.set(chain, rules);
    yield;
  }
  return {
    family: state.family,
    tables: [
      { table: 'mangle', chains: CANARY, deleted: [], jumps: [] },
      { table: 'filter', chains: new Map([...CANARY, ...top.filter]), deleted: [], jumps: jumpsOf('filter') },
      { table: 'nat', chains: nat, deleted: [], jumps: jumpsOf('nat') },
    ],
  };
}

export function planFamilyIncremental(prev?: ProxyState, next?: ProxyState): FamilyPlan | undefined {
  return runAll(familyIncrementalSteps(prev, next));
}

function* familyIncrementalSteps(prev?: ProxyState, next?: ProxyState): Steps<FamilyPlan | undefined> {
  if (next === undefined) return prev && planFamilyRemoval(prev);
  if (prev === undefined) return yield* familyFullSteps(next);
  const prevCtx = familyContext(prev);
  const nextCtx = familyContext(next);
  const renderingChanged =
    prevCtx.largeCluster !== nextCtx.largeCluster || JSON.stringify(prev.node) !== JSON.stringify(next.node);
  const keys = changedKeys(prev, next, renderingChanged);
  // The shared chains hold a line or more per service port: re-render them (all of them) only
  // when a changed service port's lines in them changed, which an endpoint change never does.
  const sharedChanged =
    renderingChanged || keys.some((key) => sharedLines(prev, key) !== sharedLines(next, key));
  const prevTop = sharedChanged ? topLevelChains(prev, prevCtx) : EMPTY_TOP;
  const nextTop = sharedChanged ? topLevelChains(next, nextCtx) : EMPTY_TOP;
  const filter = diffChains(prevTop.filter, nextTop.filter);
  const nat = diffChains(prevTop.nat, nextTop.nat);
  for (const key of keys) {
    const before = prev.servicePorts.get(key);
    const after = next.servicePorts.get(key);
    const service =
      before && after && !renderingChanged && sameEndpointChains(before, after)
        ? diffServiceChains(before, after, prevCtx, nextCtx)
        : diffChains(
            before ? ownChains(before, prevCtx) : new Map(),
            after ? ownChains(after, nextCtx) : new Map(),
          );
    for (const [chain, rules] of service.chains) nat.chains.set(chain, rules);
    for (const chain of service.deleted) nat.deleted.push(chain);
    yield;
  }
  const tables: TableChanges[] = [
    { table: 'filter', ...filter, jumps: [] },
    { table: 'nat', ...nat, jumps: [] },
  ];
  return { family: next.family, tables: tables.filter((t) => t.chains.size > 0 || t.deleted.length > 0) };
}

const EMPTY_TOP: TopLevelChains = { filter: new Map(), nat: new Map() };

/** A service port's lines in the shared chains, as one comparable string. */
function sharedLines(state: ProxyState, key: string): string {
  const sp = state.servicePorts.get(key);
  if (sp === undefined) return '';
  const shared = emptySharedRules();
  appendSharedRules(sp, shared, countsLocalhostNodePorts(state));
  return JSON.stringify(shared);
}

/** prev's family is gone: its service chains are deleted and the top-level chains emptied. */
function planFamilyRemoval(prev: ProxyState): FamilyPlan {
  const ctx = familyContext(prev);
  const top = topLevelChains(prev, ctx);
  const emptied = (chains: Chains): Chains => new Map([...chains.keys()].map((chain) => [chain, []]));
  const serviceChains = [...prev.servicePorts.values()].flatMap((sp) => [...ownChains(sp, ctx).keys()]);
  return {
    family: prev.family,
    tables: [
      { table: 'filter', chains: emptied(top.filter), deleted: [], jumps: [] },
      { table: 'nat', chains: emptied(top.nat), deleted: serviceChains, jumps: [] },
    ],
  };
}

/**
 * diffChains of the two renders of a service port whose endpoint chains render alike
 * (sameEndpointChains, same node settings), without rendering the endpoint chains both had: an
 * endpoint chain is a function of its address then, so only those of endpoints added are rendered
 * and those of endpoints gone deleted. One change of a Service with 100,000 endpoints rendered and
 * compared 200,000 endpoint chains for the one it changed.
 */
function diffServiceChains(
  before: ServicePort,
  after: ServicePort,
  prevCtx: FamilyContext,
  nextCtx: FamilyContext,
): { chains: Map<string, readonly string[]>; deleted: string[] } {
  // A policy chain whose endpoint set changed differs whatever else did (its choice names every
  // endpoint's chain): `before`'s is rendered without its choice, which differs from any chain
  // with one, so it is rewritten without `before`'s 100,000 rules being made to compare.
  const choices = {
    cluster: sameAddresses(before.clusterEndpoints, after.clusterEndpoints),
    local: sameAddresses(before.localEndpoints, after.localEndpoints),
  };
  const { chains, deleted } = diffChains(
    policyChains(before, prevCtx, choices),
    policyChains(after, nextCtx),
  );
  const had = endpointsByAddress(before);
  const has = endpointsByAddress(after);
  const added = [...has].filter(([address]) => !had.has(address)).map(([, endpoint]) => endpoint);
  for (const [chain, rules] of endpointChains(after, nextCtx, added)) chains.set(chain, rules);
  for (const [address, endpoint] of had)
    if (!has.has(address)) deleted.push(endpointChainName(before, endpoint));
  return { chains, deleted };
}

/** The same set of endpoint addresses. */
function sameAddresses(a: EndpointList, b: EndpointList): boolean {
  if (a.length !== b.length) return false;
  const addresses = new Set(a.map(endpointAddress));
  return (
    addresses.size === new Set(b.map(endpointAddress)).size &&
    b.every((e) => addresses.has(endpointAddress(e)))
  );
}

/** The endpoints that have a chain (cluster ones, then local-only ones), by address. */
function endpointsByAddress(sp: ServicePort): Map<string, Endpoint> {
  const byAddress = new Map<string, Endpoint>();
  for (const list of [sp.clusterEndpoints, sp.localEndpoints])
    for (const endpoint of list) {
      const address = endpointAddress(endpoint);
      if (!byAddress.has(address)) byAddress.set(address, endpoint);
    }
  return byAddress;
}

/** Chains of `after` whose rules differ from `before`, and chains of `before` that are gone. */
function diffChains(
  before: Chains,
  after: Chains,
): { chains: Map<string, readonly string[]>; deleted: string[] } {
  const chains = new Map<string, readonly string[]>();
  for (const [chain, rules] of after) {
    if (!sameRules(before.get(chain), rules)) chains.set(chain, rules);
  }
  const deleted = [...before.keys()].filter((chain) => !after.has(chain));
  return { chains, deleted };
}

function sameRules(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((rule, i) => rule === b[i]);
}

/** Service ports added, removed or different; every one when node settings changed. */
function changedKeys(prev: ProxyState, next: ProxyState, all: boolean): string[] {
  if (!all) return [...changedServicePorts(prev, next)].sort();
  return [...new Set([...prev.servicePorts.keys(), ...next.servicePorts.keys()])].sort();
}
