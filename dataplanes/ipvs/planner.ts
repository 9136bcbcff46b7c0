// The IPVS planner: DualStackState → virtual servers, dummy-link addresses and the companion nft
// table, in full or as the delta between two states (pure, deterministic).
import type { DualStackState } from '../../src/model/proxy-state.ts';
import type { DataplanePlanner } from '../shared/dataplane.ts';
import { diffRulesets } from '../shared/nft/diff.ts';
import { fullTransaction } from '../shared/nft/full-transaction.ts';
import type { DesiredRuleset } from '../shared/nft/ruleset.ts';
import { COMPANION_TABLE, companionRuleset } from './companion-ruleset.ts';
import { diffAddresses, diffVirtualServers } from './ipvs-diff.ts';
import { FAMILIES, type IpvsDesired, type IpvsPlan } from './ipvs-plan.ts';
import { renderPlan } from './ipvs-render.ts';
import { compareText, ipvsFamilyServers, type VirtualServer } from './virtual-servers.ts';

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
    nft[family === 'IPv4' ? 'ip' : 'ip6'] = companionRuleset(familyState, servers.boundAddresses);
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

export function createIpvsPlanner(options: IpvsPlannerOptions): DataplanePlanner<IpvsPlan> {
  return {
    mode: 'ipvs',
    planFull(state) {
      const d = desired(state, options);
      return { kind: 'full', desired: d.ipvs, nft: fullTransaction(d.nft, COMPANION_TABLE) };
    },
    planIncremental(prev, next) {
      const before = desired(prev, options);
      const after = desired(next, options);
      return {
        kind: 'incremental',
        ops: diffVirtualServers(before.ipvs, after.ipvs),
        addresses: diffAddresses(before.ipvs.boundAddresses, after.ipvs.boundAddresses),
        nft: diffRulesets(before.nft, after.nft, COMPANION_TABLE),
      };
    },
    render: renderPlan,
  };
}

export const ipvsPlanner: DataplanePlanner<IpvsPlan> = createIpvsPlanner({ scheduler: 'rr' });
