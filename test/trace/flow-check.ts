// What the kernel prediction tests share: a trace's outcomes as the rendered and the read-back
// rules must both give them, real outcomes checked against a prediction, and flows probed a
// bounded number at a time.
import assert from 'node:assert/strict';
import type { TraceOutcome } from '../../dataplanes/shared/trace/outcome.ts';
import type { EchoOutcome } from '../../harness/echo-client.ts';

/**
 * Outcomes as both readings must give them: rules are quoted as each form prints them (nft lists
 * `{ 10.96.1.0/24 }` as `10.96.1.0/24`), so a masquerade is compared by whether it happened and a
 * reject or drop by the chain that decided.
 */
export function comparable(outcomes: readonly TraceOutcome[]): unknown[] {
  return outcomes.map((o) => {
    if (o.kind === 'reject' || o.kind === 'drop') return { kind: o.kind, chain: o.rule.split(':')[0] };
    return 'masquerade' in o ? { ...o, masquerade: o.masquerade !== undefined } : o;
  });
}

/** Runs `check` over `items`, `limit` at a time; rejects with the first failure. */
export async function inBatches<T>(
  items: readonly T[],
  limit: number,
  check: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await check(items[next++]!);
  };
  await Promise.all(Array.from({ length: limit }, worker));
}

/**
 * Asserts that what real packets met (`seen`, one per attempt) is what the trace predicted: the
 * answering pod among the predicted endpoints, the source it saw (the client's, or a node address
 * when masqueraded), refused for a reject, a timeout for a drop, no answer when no service matched.
 */
export function checkFlow(
  what: string,
  predicted: readonly TraceOutcome[],
  seen: readonly EchoOutcome[],
  source: string,
  podOf: ReadonlyMap<string, string>,
  nodeAddresses: readonly string[],
): void {
  const kinds = new Set(predicted.map((o) => o.kind));
  assert.equal(kinds.size, 1, `${what}: one kind of outcome`);
  const [kind] = kinds;
  if (kind === 'reject') {
    for (const s of seen) assert.deepEqual(s, { error: 'ECONNREFUSED' }, what);
    return;
  }
  if (kind === 'drop') {
    for (const s of seen) assert.deepEqual(s, { error: 'timeout' }, what);
    return;
  }
  if (kind === 'no-service') {
    for (const s of seen) assert.ok('error' in s, `${what}: no endpoint answers, got ${JSON.stringify(s)}`);
    return;
  }
  const byPod = new Map(
    predicted.flatMap((o) => (o.kind === 'dnat' ? [[podOf.get(o.endpoint) ?? o.endpoint, o] as const] : [])),
  );
  for (const s of seen) {
    assert.ok('name' in s, `${what}: answered, got ${JSON.stringify(s)}`);
    const outcome = byPod.get(s.name);
    assert.ok(outcome, `${what}: ${s.name} answered, not one of ${[...byPod.keys()]}`);
    const peer = s.peer.replace(/:\d+$/, '');
    // Masqueraded: the node's address on the way out (for the node's own traffic, maybe its source).
    if (outcome.kind === 'dnat' && outcome.masquerade)
      assert.ok(nodeAddresses.includes(peer), `${what}: masqueraded, seen from ${peer}`);
    else assert.equal(peer, source, `${what}: source kept`);
  }
}
