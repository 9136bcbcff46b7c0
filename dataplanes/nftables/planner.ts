// The nftables planner: state -> desired ruleset -> nft transaction (full or incremental).
import type { DataplanePlanner } from '../shared/dataplane.ts';
import { desiredRuleset } from './desired-ruleset.ts';
import { diffRulesets } from './diff.ts';
import { fullTransaction } from './full-transaction.ts';
import type { NftTransaction } from './transaction.ts';

export const nftablesPlanner: DataplanePlanner<NftTransaction> = {
  mode: 'nftables',
  planFull: (state) => fullTransaction(desiredRuleset(state)),
  planIncremental: (prev, next) => diffRulesets(desiredRuleset(prev), desiredRuleset(next)),
  render: (plan) => plan.toString(),
};
