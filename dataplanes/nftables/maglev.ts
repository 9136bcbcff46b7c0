// A Maglev lookup table (Eisenbud et al., NSDI 2016; Cilium's and IPVS mh's consistent hash): M
// slots, each naming one endpoint, filled so that every endpoint holds floor(M/N) or ceil(M/N)
// slots and an endpoint that goes or comes moves few slots of the others. nftables mode with
// ipvs.scheduler mh hashes the client address into a slot (`jhash ip saddr mod M`), so a client
// keeps its endpoint across endpoint changes unless its slot moved.
//
// Pure and deterministic: each endpoint's permutation comes from a hash of its address and port
// only, and endpoints are filled in address order, so every node computes the same table from the
// same set whatever order the model or the endpoint slots give it.
import { createHash } from 'node:crypto';
import { compareText } from '../../contract/base/compare-text.ts';

/**
 * Slots per key: a prime (Maglev needs M prime and above N). Each key costs M map elements, so M is
 * far below Cilium's 16,381: 127 is half of the 251 first used, 7.6 million elements at 30,000
 * Services (two keys each) instead of 15, measured by bench/maglev-slots.ts (docs/benchmarks.md):
 * the busiest endpoint holds at most 1.10× an even share up to 16 endpoints (251: 1.04×), and an
 * endpoint leaving moves 7.6% of the others' clients on average (251: 5.3%). An endpoint set larger
 * than M leaves endpoints without a slot.
 */
export const MAGLEV_SLOTS = 127;

/** The slots' owners: table[s] is an index into `names` (e.g. "10.244.1.10:8080"). */
export function maglevTable(names: readonly string[], slots = MAGLEV_SLOTS): number[] {
  const table = new Array<number>(slots).fill(-1);
  if (names.length === 0) return table;
  const order = names.map((name, i) => ({ name, i })).sort((a, b) => compareText(a.name, b.name));
  const perms = order.map(({ name }) => {
    const digest = createHash('sha256').update(name).digest();
    return { offset: digest.readUInt32BE(0) % slots, skip: (digest.readUInt32BE(4) % (slots - 1)) + 1 };
  });
  const next = new Array<number>(order.length).fill(0);
  let filled = 0;
  for (;;) {
    for (let e = 0; e < order.length; e++) {
      const { offset, skip } = perms[e]!;
      let slot = (offset + next[e]! * skip) % slots;
      while (table[slot] !== -1) {
        next[e]!++;
        slot = (offset + next[e]! * skip) % slots;
      }
      table[slot] = order[e]!.i;
      next[e]!++;
      if (++filled === slots) return table;
    }
  }
}
