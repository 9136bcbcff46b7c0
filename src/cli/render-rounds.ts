// `kproxy render --since OLD`: the incremental sync from OLD's state to the new one, as `kproxy run`
// applies it when nothing arrives in between. A change over the round budget goes in rounds
// (src/sync/sync-rounds.ts, the function the sync step uses), each printed under a header line;
// a change that fits is one plan, printed as it always was.
import type { DataplanePlanner } from '../../contract/dataplane.ts';
import type { DualStackState } from '../../contract/proxy-state.ts';
import { ROUND_BUDGET, roundsBetween } from '../sync/sync-rounds.ts';

/** How each round's header line starts (a comment in every mode's input and in sh: tests skip it). */
export const ROUND_HEADER = '# sync round ';

/** `print` prints a plan's inputs (planner.inputs or chunkInputs) as render or render --script does. */
export function renderSince<Plan>(
  planner: DataplanePlanner<Plan>,
  prev: DualStackState,
  next: DualStackState,
  print: (plan: Plan) => string,
  budget = ROUND_BUDGET,
): string {
  const rounds = roundsBetween(prev, next, budget);
  if (rounds.length === 1) return print(planner.planIncremental(prev, next));
  const out: string[] = [];
  let before = prev;
  for (const [i, { keys, state }] of rounds.entries()) {
    out.push(
      `${ROUND_HEADER}${i + 1}/${rounds.length}: ${keys.length} service ports (a change over ${budget} endpoints is applied in rounds, cheapest ports first)\n`,
      print(planner.planIncremental(before, state)),
    );
    before = state;
  }
  return out.join('');
}
