// The model of iptables-restore's numbered edits (dataplanes/iptables/trace-ruleset.ts, through the
// fake) on inputs measured with iptables 1.8.9 (Debian 12) in a namespace, `--noflush` onto a chain
// holding b1 b2 b3: what each backend refuses, and the rules after what it applies. The kernel test
// (numbered-edits-kernel.test.ts) draws random inputs; its sweep found seed 506's, which the model
// accepted and iptables-nft refuses, and the rest bound the rule it broke: once a numbered -I puts a
// rule before one the same input added, deleting that one fails the insert (RULE_INSERT failed: No
// such file or directory).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeTables } from './fake-tables.ts';

const rule = (word: string) => `-m comment --comment ${word} -j RETURN`;
const append = (word: string) => `-A KPROXY-A ${rule(word)}`;
const insert = (at: number, word: string) => `-I KPROXY-A ${at} ${rule(word)}`;
const BASE = ['*nat', ':KPROXY-A - [0:0]', append('b1'), append('b2'), append('b3'), 'COMMIT', ''].join('\n');

/** Each case's lines, and the chain after it per backend (null: refused whole). */
const CASES: readonly {
  readonly name: string;
  readonly lines: readonly string[];
  readonly nft: readonly string[] | null;
  readonly legacy: readonly string[];
}[] = [
  {
    name: 'seed 506: an insert before a rule the input inserted, that rule deleted by number',
    lines: [insert(2, 'x'), insert(3, 'y'), insert(3, 'z'), '-D KPROXY-A 4'],
    nft: null,
    legacy: ['b1', 'x', 'z', 'b2', 'b3'],
  },
  {
    name: 'an insert before a rule the input inserted, that rule deleted by number',
    lines: [insert(2, 'x'), insert(2, 'y'), '-D KPROXY-A 3'],
    nft: null,
    legacy: ['b1', 'y', 'b2', 'b3'],
  },
  {
    name: 'an insert before a rule the input appended, that rule deleted by number',
    lines: [append('x'), insert(4, 'y'), '-D KPROXY-A 5'],
    nft: null,
    legacy: ['b1', 'b2', 'b3', 'y'],
  },
  {
    name: 'an insert before a rule the input inserted, that rule deleted by spec',
    lines: [insert(2, 'x'), insert(2, 'y'), `-D KPROXY-A ${rule('x')}`],
    nft: null,
    legacy: ['b1', 'y', 'b2', 'b3'],
  },
  {
    name: 'the inserted rule deleted first, then the rule it was put before',
    lines: [insert(2, 'x'), insert(2, 'y'), '-D KPROXY-A 2', '-D KPROXY-A 2'],
    nft: null,
    legacy: ['b1', 'b2', 'b3'],
  },
  {
    name: 'inserts before inserted rules, none deleted',
    lines: [insert(2, 'x'), insert(3, 'y'), insert(3, 'z')],
    nft: ['b1', 'x', 'z', 'y', 'b2', 'b3'],
    legacy: ['b1', 'x', 'z', 'y', 'b2', 'b3'],
  },
  {
    name: 'an inserted rule deleted that nothing was put before',
    lines: [insert(2, 'x'), insert(3, 'y'), '-D KPROXY-A 2'],
    nft: ['b1', 'y', 'b2', 'b3'],
    legacy: ['b1', 'y', 'b2', 'b3'],
  },
  {
    name: '-I 1 names no place: the rule at the head deleted',
    lines: [insert(1, 'x'), insert(1, 'y'), '-D KPROXY-A 2'],
    nft: ['y', 'b1', 'b2', 'b3'],
    legacy: ['y', 'b1', 'b2', 'b3'],
  },
  {
    name: 'one past the last rule names no place: the appended rule before it deleted',
    lines: [append('x'), insert(5, 'y'), '-D KPROXY-A 4'],
    nft: ['b1', 'b2', 'b3', 'y'],
    legacy: ['b1', 'b2', 'b3', 'y'],
  },
  {
    name: 'an insert before a rule the kernel held, that rule deleted',
    lines: [insert(2, 'y'), '-D KPROXY-A 3'],
    nft: ['b1', 'y', 'b3'],
    legacy: ['b1', 'y', 'b3'],
  },
  {
    name: 'an insert before a rule -R replaced (it keeps its handle), that rule deleted',
    lines: [`-R KPROXY-A 2 ${rule('x')}`, insert(2, 'y'), '-D KPROXY-A 3'],
    nft: ['b1', 'y', 'b3'],
    legacy: ['b1', 'y', 'b3'],
  },
  {
    name: 'inserts before inserted rules, then the chain flushed',
    lines: [insert(2, 'x'), insert(2, 'y'), '-F KPROXY-A'],
    nft: [],
    legacy: [],
  },
];

for (const backend of ['nft', 'legacy'] as const) {
  test(`iptables-${backend}-restore's numbered edits, as measured`, () => {
    for (const { name, lines, ...expected } of CASES) {
      const fake = new FakeTables(backend);
      fake.restore(BASE);
      const apply = () => fake.restore(['*nat', ...lines, 'COMMIT', ''].join('\n'));
      const after = expected[backend];
      if (after === null) {
        assert.throws(apply, /fails deleting a rule the same input added/, name);
        continue;
      }
      apply();
      const words = fake.rules('nat', 'KPROXY-A').map((line) => /--comment (\S+)/.exec(line)![1]);
      assert.deepEqual(words, after, name);
    }
  });
}
