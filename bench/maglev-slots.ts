// What the Maglev table size M of nftables mode's `mh` scheduler (dataplanes/nftables/maglev.ts)
// buys and costs (issue 29), computed, not timed: for each M and endpoint count N, over random
// endpoint sets (seeds 1..--sets), the load of the busiest endpoint against an even share
// (ceil(M/N) / (M/N)), and the share of the staying endpoints' clients an endpoint's departure
// moves to another staying endpoint (mean and worst; sh's `mod N` moves about (N-1)/N); and the
// map elements at --services Services (two keys each: the cluster IP and the node port).
//   node bench/maglev-slots.ts [--slots 61,101,127,131,251] [--endpoints 2,3,...,16,32,64]
//     [--sets 2000] [--services 30000]
// (docs/benchmarks.md, "M = 127 since", has the defaults' figures; about 2 min on a busy machine).
import { parseArgs } from 'node:util';
import { maglevTable } from '../dataplanes/nftables/maglev.ts';
import { movedShare, randomEndpointNames } from '../test/support/maglev-moves.ts';
import { prng } from '../test/support/prng.ts';
import { reportSection, round } from './measure.ts';

const { values } = parseArgs({
  options: {
    slots: { type: 'string', default: '61,101,127,131,251' },
    endpoints: { type: 'string', default: '2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,32,64' },
    sets: { type: 'string', default: '2000' },
    services: { type: 'string', default: '30000' },
  },
});
const numbers = (list: string) => list.split(',').map(Number);
const sets = Number(values.sets);
const services = Number(values.services);

const figures: Record<string, unknown> = { sets, services };
for (const slots of numbers(values.slots)) {
  const row: Record<string, number> = { elementsAt: services * 2 * slots };
  for (const n of numbers(values.endpoints)) {
    if (n >= slots) continue;
    let sum = 0;
    let worst = 0;
    for (let seed = 1; seed <= sets; seed++) {
      const random = prng(seed);
      const names = randomEndpointNames(random, n);
      const gone = names[Math.floor(random() * n)]!;
      const rest = names.filter((name) => name !== gone);
      const owners = (of: readonly string[]) => maglevTable(of, slots).map((i) => of[i]!);
      const moved = movedShare(owners(names), owners(rest), new Set(rest));
      sum += moved;
      worst = Math.max(worst, moved);
    }
    row[`n${n}Busiest`] = round(Math.ceil(slots / n) / (slots / n), 3);
    row[`n${n}MovedMean`] = round(sum / sets, 3);
    row[`n${n}MovedWorst`] = round(worst, 3);
  }
  figures[`m${slots}`] = row;
  process.stderr.write(`M=${slots}: ${JSON.stringify(row)}\n`);
}
reportSection(figures);
