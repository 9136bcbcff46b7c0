// How much a Maglev table moves clients, shared by the Maglev test (test/dataplanes/nftables/
// maglev.test.ts) and the slot-count measurement (bench/maglev-slots.ts).

/** `count` distinct endpoint names ("10.244.x.y:port"), drawn from `random`. */
export function randomEndpointNames(random: () => number, count: number): string[] {
  const names = new Set<string>();
  while (names.size < count)
    names.add(
      `10.244.${Math.floor(random() * 4)}.${Math.floor(random() * 256)}:${8080 + Math.floor(random() * 2)}`,
    );
  return [...names];
}

/**
 * The share of slots owned by `stayed` before that another of them owns after: clients moved between
 * endpoints that both stay (slots that go to an arriving endpoint or come from a leaving one must move).
 */
export function movedShare(
  before: readonly string[],
  after: readonly string[],
  stayed: ReadonlySet<string>,
): number {
  let owned = 0;
  let moved = 0;
  for (let s = 0; s < before.length; s++) {
    if (!stayed.has(before[s]!)) continue;
    owned++;
    if (stayed.has(after[s]!) && after[s] !== before[s]) moved++;
  }
  return moved / owned;
}
