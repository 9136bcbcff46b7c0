// Kernel test: the fake iptables (fake-tables.ts, through trace-ruleset.ts) applies numbered
// -R/-D/-I lines in a restore input as iptables 1.8.9 does, and refuses what it refuses. Random
// inputs (seeded; the seed is printed) of numbered edits, some out of range, some of a chain the
// same input declared, go to `iptables-<backend>-restore --noflush` in a namespace and to the fake:
// both must accept or refuse each, and hold the same rules after it. Runs once per backend.
// Sweep its seeds (as root):
//   nice -n 10 node scripts/sweep-seeds.ts test/dataplanes/iptables/numbered-edits-kernel.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Lab, requireRoot } from '../../../harness/netns.ts';
import { prng } from '../../support/prng.ts';
import { seedsLine, testSeeds } from '../../support/seeds.ts';
import { FakeTables } from './fake-tables.ts';

const CHAINS = ['KPROXY-A', 'KPROXY-B'] as const;
const INPUTS = 25;

for (const backend of ['nft', 'legacy'] as const) {
  test(`iptables-${backend}-restore: numbered -R/-D/-I as the fake applies them`, async (t) => {
    if (!requireRoot(t, 'network namespaces and iptables')) return;
    const seeds = testSeeds();
    process.stdout.write(seedsLine(`iptables-${backend} numbered edits`, seeds));
    for (const seed of seeds) {
      const random = prng(seed);
      const pick = (n: number) => Math.floor(random() * n);
      const lab = new Lab(`ipt-numbered-${backend}-${seed}`);
      try {
        const ns = await lab.addNetns('edits');
        const fake = new FakeTables(backend);
        let word = 0;
        const rule = () => `-m comment --comment w${word++} -j RETURN`;
        const restore = async (
          input: string,
        ): Promise<{ kernel: boolean; fake: boolean; stderr: string }> => {
          const result = await lab.exec(ns, `iptables-${backend}-restore`, ['--noflush'], {
            input,
            reject: false,
          });
          let refused = '';
          try {
            fake.restore(input);
          } catch (error) {
            refused = String(error);
          }
          return {
            kernel: result.exitCode === 0,
            fake: refused === '',
            stderr: `${result.stderr}${refused}`,
          };
        };
        const first = CHAINS.flatMap((chain) => [`:${chain} - [0:0]`]).concat(
          CHAINS.flatMap((chain) => Array.from({ length: 4 }, () => `-A ${chain} ${rule()}`)),
        );
        const loaded = await restore(['*nat', ...first, 'COMMIT', ''].join('\n'));
        assert.ok(loaded.kernel && loaded.fake, loaded.stderr);
        for (let i = 0; i < INPUTS; i++) {
          const lines: string[] = [];
          const lengths = new Map(CHAINS.map((chain) => [chain, fake.rules('nat', chain).length]));
          // Sometimes a chain declared (flushed) and refilled first: iptables-legacy applies the
          // numbered edits of it that follow, iptables-nft misapplies them (trace-ruleset.ts).
          let declared: string | undefined;
          if (random() < 0.25) {
            const chain = CHAINS[pick(CHAINS.length)]!;
            declared = chain;
            const count = pick(3);
            lines.push(`:${chain} - [0:0]`);
            for (let r = 0; r < count; r++) lines.push(`-A ${chain} ${rule()}`);
            lengths.set(chain, count);
          }
          let misapplied = false;
          for (let edit = 1 + pick(4); edit > 0; edit--) {
            const chain = CHAINS[pick(CHAINS.length)]!;
            const length = lengths.get(chain)!;
            // Mostly in range, sometimes 0 or past the end (by one or two).
            const at = random() < 0.8 ? 1 + pick(Math.max(length, 1)) : [0, length + 1, length + 2][pick(3)]!;
            const kind = pick(3);
            if (backend === 'nft' && chain === declared && !(kind === 2 && at === 1)) misapplied = true;
            if (kind === 0) lines.push(`-R ${chain} ${at} ${rule()}`);
            else if (kind === 1) {
              lines.push(`-D ${chain} ${at}`);
              lengths.set(chain, Math.max(length - 1, 0));
            } else {
              lines.push(`-I ${chain} ${at} ${rule()}`);
              lengths.set(chain, length + 1);
            }
          }
          const input = ['*nat', ...lines, 'COMMIT', ''].join('\n');
          if (misapplied) {
            // -R/-D fail, -I N lands at the head (probe-documented): the fake refuses it all.
            assert.throws(() => fake.restore(input), Error, `seed ${seed}, input ${i}\n${input}`);
            continue;
          }
          const outcome = await restore(input);
          assert.equal(outcome.fake, outcome.kernel, `seed ${seed}, input ${i}: ${outcome.stderr}\n${input}`);
          const saved = (await lab.exec(ns, `iptables-${backend}-save`, ['-t', 'nat'])).stdout;
          for (const chain of CHAINS)
            assert.deepEqual(
              fake.rules('nat', chain),
              saved.split('\n').filter((line) => line.startsWith(`-A ${chain} `)),
              `seed ${seed}, input ${i}: ${chain}\n${input}`,
            );
        }
      } finally {
        await lab.destroy();
      }
    }
  });
}
